"""kit.env: the parsers on real nvidia-smi tables (../shared/data/logs) and documented edge forms, and the
fingerprint over LocalHost and the real sshd."""
from __future__ import annotations

import json
import shlex

import pytest

import kit
from kit.env import (
    Fingerprint,
    fingerprint,
    parse_environ,
    parse_gpu_query,
    parse_nccl_version,
    parse_nvcc_version,
    parse_nvidia_smi_header,
    parse_topology,
)
from kit.errors import ParseError
from tests.conftest import TEST_DATA


@pytest.mark.shared_data
def test_topology_h100_space_aligned(shared_data):
    path = shared_data / "logs" / "nvidia_smi_topo_8x_H100_NV18_ml-engineering.log"
    topo = parse_topology(path.read_text(), source=path.name)
    assert topo.gpus == [f"GPU{i}" for i in range(8)] and topo.nics == []
    assert topo.kind == "NVLink" and topo.worst == "NV18"
    assert topo.summary == "8 GPUs, NVLink (worst link NV18)"
    assert topo.links.at["GPU3", "GPU3"] == "X" and topo.links.at["GPU0", "GPU7"] == "NV18"
    assert list(topo.affinity.columns) == ["CPU Affinity", "NUMA Affinity"]
    assert topo.affinity.at["GPU5", "CPU Affinity"] == "52-103,156-207"
    assert topo.affinity.at["GPU5", "NUMA Affinity"] == "1"
    assert repr(topo) == "Topology(8 GPUs, NVLink (worst link NV18))"


@pytest.mark.shared_data
def test_topology_rtx4090_tabs_nic_rows_and_legend(shared_data):
    path = shared_data / "logs" / "nvidia_smi_topo_8x_RTX4090_pcie_nccl-tests307.log"
    topo = parse_topology(path.read_text(), source=path.name)
    assert topo.gpus == [f"GPU{i}" for i in range(8)] and topo.nics == ["NIC0"]
    assert topo.kind == "PCIe-only" and topo.worst == "SYS"
    assert topo.summary == "8 GPUs, 1 NIC, PCIe-only (worst link SYS)"
    assert topo.links.at["GPU0", "GPU1"] == "PIX" and topo.links.at["GPU0", "GPU4"] == "SYS"
    assert topo.links.at["NIC0", "GPU2"] == "PIX" and topo.links.at["GPU7", "NIC0"] == "SYS"
    assert topo.nic_legend == {"NIC0": "mlx5_bond_0"}
    assert list(topo.affinity.columns) == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo.affinity.at["GPU4", "CPU Affinity"] == "36-71,108-143"
    assert topo.affinity["GPU NUMA ID"].isna().all()  # N/A, after the stray empty tab cell
    html = topo._repr_html_()
    assert "PCIe-only" in html and "<table>" in html
    json.dumps(topo.to_dict())


def test_topology_ansi_header_mixed_links_and_single_gpu():
    text = ("\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV4\tSYS\tSYS\t0-11\t0\t\tN/A\n"
            "GPU1\tNV4\t X \tSYS\tSYS\t0-11\t0\t\tN/A\n"
            "GPU2\tSYS\tSYS\t X \tNV4\t12-23\t1\t\tN/A\n"
            "GPU3\tSYS\tSYS\tNV4\t X \t12-23\t1\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    topo = parse_topology(text)
    assert topo.kind == "mixed" and topo.worst == "SYS"
    assert topo.summary == "4 GPUs, mixed (worst link SYS)"
    one = parse_topology("        GPU0    CPU Affinity    NUMA Affinity\nGPU0     X      0-7     0\n")
    assert one.kind == "single GPU" and one.worst is None and one.summary == "1 GPU, single GPU"
    nv = parse_topology("\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV4\t X \n")
    assert nv.worst == "NV4"  # fewer bonded links is the slower pair


def test_topology_errors_name_the_source():
    with pytest.raises(ParseError, match="topo.txt: no nvidia-smi topo -m header"):
        parse_topology("No devices were found\n", source="topo.txt")
    with pytest.raises(ParseError, match="row GPU1 has link cells"):
        parse_topology("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\n", source="t")


def test_gpu_query_csv_with_header_units_and_na():
    text = ("index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%], power.draw [W], "
            "compute_cap, pci.bus_id\n"
            "0, NVIDIA H100 80GB HBM3, 81559 MiB, 412 MiB, 0 %, 68.21 W, 9.0, 00000000:1B:00.0\n"
            "1, NVIDIA H100 80GB HBM3, 81559 MiB, 412 MiB, 0 %, [N/A], 9.0, 00000000:43:00.0\n")
    df = parse_gpu_query(text)
    assert list(df.columns) == ["index", "name", "memory.total", "memory.used", "utilization.gpu", "power.draw",
                                "compute_cap", "pci.bus_id"]
    assert df.attrs["units"] == {"memory.total": "MiB", "memory.used": "MiB", "utilization.gpu": "%", "power.draw": "W"}
    assert df["memory.total"].tolist() == [81559, 81559] and df.at[0, "power.draw"] == 68.21
    assert df["power.draw"].isna().tolist() == [False, True]
    assert df.at[1, "compute_cap"] == "9.0" and df.at[1, "pci.bus_id"] == "00000000:43:00.0"


def test_gpu_query_noheader_real_row_and_errors():
    row = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 97887 MiB, 580.126.20, 0x2BB410DE\n"
    df = parse_gpu_query(row, fields=["name", "memory.total", "driver_version", "pci.device_id"])
    assert df.to_dict("records") == [{"name": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                                      "memory.total": 97887, "driver_version": "580.126.20",
                                      "pci.device_id": "0x2BB410DE"}]
    with pytest.raises(ParseError, match="no header"):
        parse_gpu_query(row)
    with pytest.raises(ParseError, match="row 1 has 4 values for 2 fields"):
        parse_gpu_query(row, fields=["name", "memory.total"], source="q.csv")


def test_version_parsers():
    assert parse_nccl_version("host:1:2 [0] NCCL INFO NCCL version 2.18.1+cuda12.1") == "2.18.1"
    assert parse_nccl_version((2, 21, 5)) == "2.21.5" and parse_nccl_version([2, 27, 3]) == "2.27.3"
    assert parse_nccl_version(22105) == "2.21.5" and parse_nccl_version(2708) == "2.7.8"
    assert parse_nccl_version("libnccl.so.2\nlibnccl.so.2.21.5") == "2.21.5"
    assert parse_nccl_version("nothing here") is None
    banner = "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |"
    assert parse_nvidia_smi_header(banner) == {"driver": "550.54.15", "cuda": "12.4"}
    assert parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131") == "12.4"
    assert parse_environ(b"PATH=/bin\0NCCL_PROTO=LL\0NCCL_P2P_LEVEL=SYS\0X=1") == {"NCCL_P2P_LEVEL": "SYS",
                                                                                  "NCCL_PROTO": "LL"}


def test_fingerprint_on_a_gpu_less_host_with_a_running_process(host, sshd):
    log = host.run(f"mktemp -p {shlex.quote(sshd.tmp)} fp.XXXXXX.log", check=True).stdout.strip()
    secret = "9f2c" * 8  # NCCL's InfiniBand key: its name is shown, its value never (issue 34)
    job = host.spawn("sleep 60", log=log, env={"NCCL_PROTO": "LL", "NCCL_MIN_NCHANNELS": "8", "OTHER": "x",
                                               "NCCL_IB_SECRET_KEY": secret})
    try:
        fp = fingerprint(host, pid=job.pid)
        again = fingerprint(host, pid=job.pid)
    finally:
        job.stop(grace=2)
    assert isinstance(fp, Fingerprint) and fp.host == host.name
    assert fp.os and fp.kernel and fp.cpu_count and fp.cpu_count >= 1 and fp.mem_gib > 0
    assert fp.nccl_env == {"NCCL_MIN_NCHANNELS": "8", "NCCL_PROTO": "LL", "NCCL_IB_SECRET_KEY": "***REDACTED***"}
    assert secret not in repr(fp) + json.dumps(fp.to_dict()) + fp._repr_html_()
    assert fp.python == host.run("python3 -c 'import platform; print(platform.python_version())'").stdout.strip()
    # This machine has no GPU: those fields are None with a reason, never an exception.
    assert fp.gpus is None and fp.topology is None and "nvidia-smi not found" in fp.missing["gpus"]
    assert fp.torch is None and "not installed" in fp.missing["torch"]
    text = repr(fp)
    assert text.startswith(f"Fingerprint({host.name!r})") and "NCCL_PROTO=LL" in text and "0x" not in text
    assert repr(again) == text  # deterministic: a second probe of the same host prints the same
    assert "<table>" in fp._repr_html_()
    data = fp.to_dict()
    json.dumps(data)
    assert data["nccl_env"]["NCCL_PROTO"] == "LL"


def test_fingerprint_unknown_pid_is_a_reason_not_an_error(host):
    fp = fingerprint(host, pid=4_000_000)
    assert fp.nccl_env is None and "no process 4000000" in fp.missing["nccl_env"]


H200 = TEST_DATA / "env" / "h200"


def test_real_h200_outputs_recorded_on_the_gpu_machine():
    topo = parse_topology((H200 / "topo_m.txt").read_text(), source="topo_m.txt")
    assert "\x1b[4m" in (H200 / "topo_m.txt").read_text()  # the raw capture really has the ANSI header
    assert topo.gpus == ["GPU0"] and topo.summary == "1 GPU, single GPU"
    assert topo.affinity.loc["GPU0"].tolist() == ["0-15", "0", None]
    gpus = parse_gpu_query((H200 / "query_gpu.csv").read_text())
    assert gpus.to_dict("records") == [{"index": 0, "name": "NVIDIA H200", "memory.total": 143771,
                                        "compute_cap": "9.0", "driver_version": "580.159.04",
                                        "pci.bus_id": "00000000:00:06.0"}]
    units = parse_gpu_query((H200 / "query_gpu_units.csv").read_text())
    assert units.at[0, "memory.used"] == 0 and units.at[0, "power.draw"] == 81.68
    assert units.attrs["units"]["power.draw"] == "W"
    assert parse_nvidia_smi_header((H200 / "nvidia_smi.txt").read_text()) == {"driver": "580.159.04", "cuda": "13.0"}


def _fake_nvidia_smi(tmp_path, body: str, monkeypatch) -> None:
    """Put a stand-in ``nvidia-smi`` first on this machine's PATH (LocalHost runs with os.environ)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")


def test_fingerprint_reads_the_recorded_h200_outputs_through_nvidia_smi(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, (f"case \"$*\" in\n  *query-gpu*) cat {shlex.quote(str(H200 / 'query_gpu.csv'))} ;;\n"
                                f"  *topo*) cat {shlex.quote(str(H200 / 'topo_m.txt'))} ;;\n"
                                f"  *) cat {shlex.quote(str(H200 / 'nvidia_smi.txt'))} ;;\nesac\n"), monkeypatch)
    fp = fingerprint(kit.connect("local"))
    assert fp.gpu_summary == "1 x NVIDIA H200 (sm 9.0, 140 GiB)"
    assert fp.topology.summary == "1 GPU, single GPU" and (fp.driver, fp.cuda_driver) == ("580.159.04", "13.0")
    assert not {"gpus", "topology", "driver"} & set(fp.missing)


def test_fingerprint_survives_a_hung_nvidia_smi(tmp_path, monkeypatch):
    """A GPU fallen off the bus can hang nvidia-smi: the GPU fields get a reason, the rest still arrives."""
    import time

    import kit.env._fingerprint

    monkeypatch.setattr(kit.env._fingerprint, "NVIDIA_SMI_TIMEOUT_S", 1)
    _fake_nvidia_smi(tmp_path, "sleep 60\n", monkeypatch)
    t0 = time.monotonic()
    fp = fingerprint(kit.connect("local"), timeout=30)
    assert time.monotonic() - t0 < 15
    assert fp.gpus is None and fp.topology is None and "did not answer within 1 s" in fp.missing["gpus"]
    assert fp.os and fp.python


def test_nvidia_smi_q_output_gets_a_clear_message():
    """``nvidia-smi -q`` is read for its versions, and refused by the GPU-table parser with the command
    it wants; text that is neither is an error, never ``None`` for both (issue 16)."""
    from kit.errors import ParseError

    q = ("==============NVSMI LOG==============\n\nTimestamp                                 : Tue Dec  2 2025\n"
         "Driver Version                            : 580.126.20\nCUDA Version                              : 13.0\n\n"
         "Attached GPUs                             : 1\nGPU 00000000:18:00.0\n    Product Name   : NVIDIA H200\n")
    assert parse_nvidia_smi_header(q) == {"driver": "580.126.20", "cuda": "13.0"}
    with pytest.raises(ParseError, match=r"q.txt: this is `nvidia-smi -q` output; .*--query-gpu="):
        parse_gpu_query(q, source="q.txt")
    with pytest.raises(ParseError, match=r"x.txt: no 'Driver Version' or 'CUDA Version' found"):
        parse_nvidia_smi_header("hello\n", source="x.txt")


def test_topology_keeps_gpu_nic_links_when_nic_rows_are_cut():
    """A pasted ``topo -m`` whose NIC rows were cut still has the NIC columns of the GPU rows (issue 16)."""
    text = ("\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\tPIX\tSYS\t0-31\t0\n"
            "GPU1\tSYS\t X \tSYS\tPIX\t32-63\t1\n")
    topo = parse_topology(text)
    assert topo.nics == ["NIC0", "NIC1"]
    assert topo.nic_links.loc["GPU0", "NIC0"] == "PIX" and topo.nic_links.loc["GPU1", "NIC1"] == "PIX"
    assert topo.kind == "PCIe-only" and topo.summary == "2 GPUs, 2 NICs, PCIe-only (worst link SYS)"
