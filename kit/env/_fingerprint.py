"""fingerprint(host) -> Fingerprint: one probe command, then the parsers."""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

import kit.engines
from kit.env import _parsers
from kit.env._parsers import Topology
from kit.errors import KitError, ParseError
from kit.redact import mask_secrets
from kit.util import host_program

GPU_FIELDS = ["index", "name", "memory.total", "compute_cap", "driver_version", "pci.bus_id"]

_VERSION_FIELDS = ("torch", "flashinfer")
# engine (kit.engines) -> the Fingerprint field its version also fills (the fields kept from before the registry)
_ENGINE_FIELDS = {"sglang": "sglang", "vllm": "vllm", "trtllm": "tensorrt_llm"}


@dataclass
class Fingerprint:
    """What one host is. Fields are None when the host could not say; ``missing`` has the reasons."""

    host: str
    os: str | None = None
    kernel: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    mem_gib: float | None = None
    gpus: pd.DataFrame | None = None
    topology: Topology | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    cuda_toolkit: str | None = None
    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    nccl: str | None = None
    sglang: str | None = None
    vllm: str | None = None
    flashinfer: str | None = None
    tensorrt_llm: str | None = None
    engines: dict[str, str | None] = field(default_factory=dict)
    nccl_env: dict[str, str] | None = None
    pid: int | None = None
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_summary(self) -> str | None:
        """``8 x NVIDIA H100 80GB HBM3 (sm 9.0, 80 GiB)``; None without GPUs."""
        if self.gpus is None or self.gpus.empty:
            return None
        parts = []
        for name, grp in self.gpus.groupby("name", sort=False):
            extra = []
            if "compute_cap" in grp and grp["compute_cap"].iloc[0]:
                extra.append(f"sm {grp['compute_cap'].iloc[0]}")
            if "memory.total" in grp and pd.notna(grp["memory.total"].iloc[0]):
                extra.append(f"{float(grp['memory.total'].iloc[0]) / 1024:.0f} GiB")
            parts.append(f"{len(grp)} x {name}" + (f" ({', '.join(extra)})" if extra else ""))
        return "; ".join(parts)

    def _rows(self) -> list[tuple[str, str]]:
        def show(v: Any) -> str:
            return "—" if v is None else str(v)
        rows = [
            ("host", self.host), ("os", show(self.os)), ("kernel", show(self.kernel)),
            ("cpu", show(self.cpu) + (f" ({self.cpu_count} threads)" if self.cpu_count else "")),
            ("memory", "—" if self.mem_gib is None else f"{self.mem_gib:.1f} GiB"),
            ("gpus", show(self.gpu_summary)), ("links", show(self.topology.summary if self.topology else None)),
            ("driver", show(self.driver)), ("cuda (driver)", show(self.cuda_driver)),
            ("cuda (toolkit)", show(self.cuda_toolkit)), ("python", show(self.python)),
            ("torch", show(self.torch) + (f" (cuda {self.torch_cuda})" if self.torch_cuda else "")),
            ("nccl", show(self.nccl)), ("flashinfer", show(self.flashinfer)),
            *((name, show(v)) for name, v in self.engines.items()),
        ]
        if self.pid is not None or self.nccl_env is not None:
            env = ("—" if self.nccl_env is None
                   else (" ".join(f"{k}={v}" for k, v in self.nccl_env.items()) or "(none set)"))
            rows.append((f"NCCL_* of pid {self.pid}", env))
        return rows

    def __repr__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        lines = [f"Fingerprint({self.host!r})"] + [f"  {k:<{width}}  {v}" for k, v in self._rows()[1:]]
        if self.missing:
            lines.append("  missing: " + "; ".join(f"{k}: {v}" for k, v in sorted(self.missing.items())))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in self._rows())
        out = f"<table>{body}</table>"
        if self.topology is not None:
            out += self.topology._repr_html_()
        if self.missing:
            out += "<details><summary>not available on this host</summary><ul>" + "".join(
                f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in sorted(self.missing.items())
            ) + "</ul></details>"
        return out

    def to_dict(self) -> dict:
        """JSON-able: scalars as they are, GPUs as a list of records, the topology as its dict."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, pd.DataFrame):
                value = json.loads(value.to_json(orient="records"))
            elif isinstance(value, Topology):
                value = value.to_dict()
            out[name] = value
        out["gpu_summary"] = self.gpu_summary
        return out


# One round trip: every section is introduced by a marker line; tools that are missing say so.
_PROBE = r"""
echo '@@os'; cat /etc/os-release 2>/dev/null
echo '@@uname'; uname -r 2>/dev/null
echo '@@cpu'; (lscpu 2>/dev/null || cat /proc/cpuinfo 2>/dev/null) | head -n 40
echo '@@nproc'; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN
echo '@@mem'; grep -m1 MemTotal /proc/meminfo 2>/dev/null
if command -v nvidia-smi >/dev/null 2>&1; then
  T=''; command -v timeout >/dev/null 2>&1 && T='timeout -k 2 PROBE_S'
  echo '@@gpu'; $T nvidia-smi --query-gpu=FIELDS --format=csv,nounits 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; then
    echo '@@gpu'; $T nvidia-smi --query-gpu=FIELDS_OLD --format=csv,nounits 2>&1; rc=$?
  fi
  echo "@@gpu_rc $rc"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then  # a hung driver: the other calls would hang too
    echo "@@topo_rc $rc"
  else
    echo '@@smi'; $T nvidia-smi 2>&1 | head -n 6
    echo '@@topo'; $T nvidia-smi topo -m 2>&1; echo "@@topo_rc $?"
  fi
else
  echo '@@no_nvidia_smi'
fi
echo '@@nvcc'; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null
echo '@@nccl_so'; (ldconfig -p 2>/dev/null | grep -o 'libnccl\.so[.0-9]*' ;
  ls /usr/lib/*/libnccl.so.* /usr/local/cuda/lib64/libnccl.so.* 2>/dev/null) | sort -u | tail -n 3
PID_SECTION
echo '@@end'
"""

# Each nvidia-smi call is cut off after this long (a GPU fallen off the bus can hang it for minutes).
NVIDIA_SMI_TIMEOUT_S = 20


def fingerprint(host, *, pid: int | None = None, python: str = "python3", timeout: float = 120) -> Fingerprint:
    """Fingerprint ``host`` (a kit Host): OS, CPU, GPUs, link matrix, CUDA/NCCL/engine versions, and the
    ``NCCL_*`` variables of process ``pid`` (e.g. the running server) when given. What the host lacks leaves
    its field None with a reason in ``.missing``; only an unreachable host raises (RemoteError)."""
    fp = Fingerprint(host=host.name, pid=pid)
    proc = f"/proc/{int(pid or 0)}"
    pid_section = "" if pid is None else (
        f"echo '@@environ'; if [ -r {proc}/environ ]; then tr '\\0' '\\n' < {proc}/environ; "
        f"elif [ -e {proc} ]; then echo '@@environ_denied'; else echo '@@environ_nopid'; fi")
    script = (_PROBE.replace("FIELDS_OLD", ",".join(f for f in GPU_FIELDS if f != "compute_cap"))
              .replace("FIELDS", ",".join(GPU_FIELDS)).replace("PROBE_S", f"{NVIDIA_SMI_TIMEOUT_S:g}")
              .replace("PID_SECTION", pid_section))
    res = host.run(script, timeout=timeout)
    sections = _sections(res.stdout)
    _fill_system(fp, sections)
    _fill_gpus(fp, sections)
    _fill_versions(fp, sections, host, python, timeout)
    if pid is not None:
        env = sections.get("environ")
        why = {None: f"could not read /proc/{pid}/environ",
               "@@environ_denied": f"/proc/{pid}/environ not readable (process of another user?)",
               "@@environ_nopid": f"no process {pid} on {host.name}"}.get(env and env.strip())
        if why:
            fp.missing["nccl_env"] = why
        else:
            fp.nccl_env = mask_secrets(_parsers.parse_environ(env, "NCCL_"))  # NCCL_IB_SECRET_KEY
    return fp


def _sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        m = re.match(r"^@@(\w+)(?: (.*))?$", line)
        if m and m.group(1) not in ("environ_denied", "environ_nopid"):
            current, value = m.groups()
            if value is None:
                out[current] = []  # a section: the lines up to the next marker (a repeated one replaces it)
            else:
                out.setdefault(current, []).append(value)  # ``@@name value``: one value
                current = None
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _fill_system(fp: Fingerprint, s: dict[str, str]) -> None:
    fp.os = _parsers.parse_os_release(s.get("os", "")) or None
    if fp.os is None:
        fp.missing["os"] = "/etc/os-release not found"
    fp.kernel = s.get("uname", "").strip() or None
    fp.cpu = _parsers.parse_cpu_model(s.get("cpu", ""))
    if fp.cpu is None:
        fp.missing["cpu"] = "no model name in lscpu or /proc/cpuinfo"
    nproc = s.get("nproc", "").strip()
    fp.cpu_count = int(nproc) if nproc.isdigit() else None
    m = re.search(r"MemTotal:\s+(\d+)\s*kB", s.get("mem", ""))
    fp.mem_gib = round(int(m.group(1)) / 1024 / 1024, 1) if m else None


def _fill_gpus(fp: Fingerprint, s: dict[str, str]) -> None:
    rc = s.get("gpu_rc", "1").strip()
    why = ("nvidia-smi not found on the host" if "no_nvidia_smi" in s else
           f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:g} s (GPU or driver hung?)"
           if rc in ("124", "137") else None)
    if why:
        for key in ("gpus", "topology", "driver", "cuda_driver"):
            fp.missing[key] = why
        return
    _parse_into(fp, "gpus", s, "gpu", _parsers.parse_gpu_query, "nvidia-smi --query-gpu")
    try:
        header = _parsers.parse_nvidia_smi_header(s.get("smi", ""), source=f"{fp.host}: nvidia-smi")
    except ParseError:
        header = {"driver": None, "cuda": None}  # said below, as a missing driver version
    fp.driver, fp.cuda_driver = header["driver"], header["cuda"]
    if fp.driver is None and fp.gpus is not None and "driver_version" in fp.gpus:
        fp.driver = str(fp.gpus["driver_version"].iloc[0])
    if fp.driver is None:
        fp.missing["driver"] = "nvidia-smi printed no driver version"
    _parse_into(fp, "topology", s, "topo", _parsers.parse_topology, "nvidia-smi topo -m")


def _parse_into(fp: Fingerprint, field_name: str, s: dict[str, str], section: str, parse, what: str) -> None:
    """``fp.<field_name>`` from the probe's ``section`` when its command exited 0, else the reason in ``missing``."""
    text = s.get(section, "")
    if s.get(f"{section}_rc", "1").strip() != "0":
        fp.missing[field_name] = f"{what} failed: " + (text.strip().splitlines() or ["?"])[-1][:200]
        return
    try:
        setattr(fp, field_name, parse(text, source=f"{fp.host}: {what}"))
    except ParseError as exc:
        fp.missing[field_name] = str(exc)


def _fill_versions(fp: Fingerprint, s: dict[str, str], host, python: str, timeout: float) -> None:
    fp.cuda_toolkit = _parsers.parse_nvcc_version(s.get("nvcc", ""))
    if fp.cuda_toolkit is None:
        fp.missing["cuda_toolkit"] = "nvcc not found"
    # each engine of the registry that is a Python distribution, with its distribution names
    engines = [(e.name, list(e.distributions)) for e in kit.engines.engines() if e.distributions]
    try:
        info = host.python(host_program("kit.env", "versions_probe.py", f"probe({engines!r})"), python=python,
                           timeout=timeout)
    except KitError as exc:
        info = None
        for key in ("python", *_VERSION_FIELDS, *(name for name, _ in engines)):
            fp.missing[key] = f"{python} probe failed: {exc}"
    if info:
        fp.python = info.get("python")
        for key in _VERSION_FIELDS:
            setattr(fp, key, info.get(key))
            if info.get(key) is None:
                fp.missing[key] = f"not installed for {python}"
        fp.engines = dict(info.get("engines") or {})
        for name, v in fp.engines.items():
            if name in _ENGINE_FIELDS:
                setattr(fp, _ENGINE_FIELDS[name], v)
            if v is None:
                fp.missing[name] = f"not installed for {python}"
        fp.torch_cuda = info.get("torch_cuda")
        if info.get("torch_error"):
            fp.missing["torch_cuda"] = f"import torch failed: {info['torch_error']}"
        if info.get("torch_nccl") is not None:
            fp.nccl = _parsers.parse_nccl_version(info["torch_nccl"])
        elif info.get("nccl_wheel"):
            fp.nccl = _parsers.parse_nccl_version(info["nccl_wheel"])
    fp.nccl = fp.nccl or _parsers.parse_nccl_version(s.get("nccl_so", ""))
    if fp.nccl is None:
        fp.missing["nccl"] = "no torch.cuda.nccl, nvidia-nccl wheel or libnccl.so found"
