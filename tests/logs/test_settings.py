"""kit.logs.settings: effective settings of an engine run, each value with the file and line it came from,
on the sample session's logs, the real third-party logs of ../shared/data and a real engine process's
/proc/PID/environ."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import kit
from tests.conftest import ROOT

SAMPLE = ROOT / "notebooks" / "sample"


def test_sglang_dump_and_the_engine_log_line_that_overrides_it():
    s = kit.logs.settings(SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log")
    assert s.engine == "sglang"
    eff = s.effective
    # the dump says disable_custom_all_reduce=False; the engine's later line says it disabled it: the line wins
    assert s.args["disable_custom_all_reduce"] is False
    assert eff["custom_all_reduce"] is False
    ev = s.get("custom_all_reduce")
    assert ev.line == 5 and "Custom allreduce is disabled" in ev.text
    assert ev.where.endswith("sglang_0.5.9_tp8_default.log:5")
    assert eff["tp_size"] == 8 and eff["attention_backend"] == "flashinfer" and eff["cuda_graph_max_bs"] == 8
    assert eff["overlap_schedule"] is False and eff["decode_batch_max"] == 1 and eff["eager_decode_lines"] == 0


def test_vllm_config_line_backend_and_spec():
    s = kit.logs.settings(SAMPLE / "logs" / "vllm_0.11.0_tp8_mtp.log")
    eff = s.effective
    assert s.engine == "vllm" and eff["tp_size"] == 8 and eff["speculative"] == "mtp"
    assert eff["attention_backend"] == "flash_attn" and s.get("attention_backend").line == 4
    assert eff["custom_all_reduce"] is False


def test_nccl_env_echo_and_transports():
    s = kit.logs.settings(SAMPLE / "logs" / "nccl_info_tp8_ll.log")
    assert s.env["NCCL_PROTO"] == "LL" and s.effective["nccl_proto"] == "LL"
    assert s.effective["nccl_transports"] == {"P2P", "SHM"} and s.effective["p2p"] is True


def test_vllm_non_default_args_and_capture_sizes(tmp_path):
    """Synthetic edge case: a vLLM ``non-default args`` dict and a config with capture sizes."""
    log = tmp_path / "vllm.log"
    log.write_text("(APIServer pid=1) INFO 11-20 12:00:00 [utils.py:233] non-default args: {'model': 'm', "
                   "'tensor_parallel_size': 4, 'enforce_eager': True, 'tokenizer_mode': 'slow'}\n"
                   "(EngineCore_DP0 pid=2) INFO 11-20 12:00:01 [core.py:77] Initializing a V1 LLM engine (v0.11.0) "
                   "with config: model='m', tensor_parallel_size=4, compilation_config={\"cudagraph_capture_sizes\": "
                   "[8, 4, 2, 1]}\n")
    s = kit.logs.settings(log)
    eff = s.effective
    assert eff["tp_size"] == 4 and eff["cuda_graph"] is False and eff["tokenizer_mode"] == "slow"
    assert eff["cuda_graph_bs"] == [1, 2, 4, 8] and s.get("cuda_graph_bs").line == 2


def test_get_server_info_json(tmp_path):
    p = tmp_path / "server_info.json"
    p.write_text(json.dumps({"tp_size": 2, "attention_backend": "fa3", "disable_cuda_graph": False,
                             "cuda_graph_max_bs": 160, "model_path": "m", "version": "0.5.9"}))
    s = kit.logs.settings(p)
    assert s.effective["attention_backend"] == "fa3" and s.effective["cuda_graph_max_bs"] == 160
    assert s.sources[str(p)] == "get_server_info JSON"


def test_environ_of_a_real_process(tmp_path):
    """The environment of a running process, read from /proc/PID/environ (NUL-separated)."""
    if not os.path.exists("/proc/self/environ"):
        pytest.skip("no /proc on this system")
    env = dict(os.environ, VLLM_TRACE_FUNCTION="1", NCCL_PROTO="LL")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.2)
        data = open(f"/proc/{proc.pid}/environ", "rb").read()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    cap = tmp_path / "environ"
    cap.write_bytes(data)
    s = kit.logs.settings(cap)
    assert s.env["VLLM_TRACE_FUNCTION"] == "1" and s.effective["nccl_proto"] == "LL"
    assert s.sources[str(cap)].startswith("process environment")


@pytest.mark.shared_data
def test_real_third_party_settings(shared_data):
    logs = shared_data / "logs"
    topo = kit.logs.settings(logs / "nvidia_smi_topo_8x_RTX4090_pcie_nccl-tests307.log")
    assert topo.effective == {"topology": "PCIe-only", "gpus": 8}
    assert topo.get("topology").line == 3  # the GPU0 row of the real capture
    nv = kit.logs.settings(logs / "nvidia_smi_topo_8x_H100_NV18_ml-engineering.log")
    assert nv.effective["topology"] == "NVLink"
    # 2x 2080Ti: NCCL connects the two GPUs through host shared memory: no P2P
    shm = kit.logs.settings(logs / "nccl_info_2x2080Ti_shm_socket_issue1190.log")
    assert shm.effective["p2p"] is False and shm.get("p2p").line == 8
    assert "via direct shared memory" in shm.get("p2p").text
    p2p = kit.logs.settings(logs / "nccl_info_p2p_ipc_read_and_net_socket_issue952.log")
    assert p2p.effective["p2p"] is True and p2p.effective["nccl_transports"] == {"P2P", "NET"}
    # truncated real dumps: what was read before the cut, engine known
    dump = kit.logs.settings(logs / "sglang_0.4.7_server_args_dump_issue7227.log")
    assert dump.engine == "sglang" and dump.args["context_length"] == 8000 and dump.args.get("__truncated__")
    sm120 = kit.logs.settings(logs / "sglang_new_server_args_dict_sm120_club3090_1261.log")
    assert sm120.engine == "sglang" and sm120.args["tokenizer_backend"] == "huggingface"


def test_unreadable_file_is_one_line_error(tmp_path):
    with pytest.raises(kit.errors.LogFormatError, match="cannot read"):
        kit.logs.settings(tmp_path / "missing.log")


@pytest.mark.parametrize("line,backend", [
    ("[2026-01-01 00:00:00] Attention backend not specified. Use fa3 backend by default.", "fa3"),
    ("[2026-01-01 00:00:00] Use trtllm_mha as attention backend on sm100 for Qwen3ForCausalLM", "trtllm_mha"),
    ("(EngineCore_DP0 pid=7) INFO 01-01 00:00:00 [cuda.py:343] Using FLASHINFER attention backend out of "
     "potential backends: ['FLASHINFER', 'FLASH_ATTN'].", "flashinfer"),
    ("(Worker pid=7) INFO 01-01 00:00:00 [cuda.py:240] Using FlashInfer backend with HND KV cache layout on V1 "
     "engine by default for Blackwell (SM 10.0) GPUs.", "flashinfer"),
    ("(Worker pid=7) INFO 01-01 00:00:00 [cuda.py:230] Using Cutlass MLA backend on V1 engine.", "cutlass_mla"),
    ("(Worker pid=7) INFO 01-01 00:00:00 [cuda.py:403] Using Flash Attention backend on V1 engine.", "flash_attn"),
])
def test_attention_backend_lines_of_both_engines(tmp_path, line, backend):
    """The documented backend-choice lines (../shared/reference/serving-formats.md), one per form."""
    f = tmp_path / "a.log"
    f.write_text(line + "\n")
    s = kit.logs.settings(f)
    assert s.effective["attention_backend"] == backend and s.get("attention_backend").line == 1
