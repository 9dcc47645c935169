"""The tinyserve fixture engine itself: it imports without a GPU or torch, finds the device capability
in the documented order, and its defaults depend on the architecture the way the notebooks explain."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

ENGINE = ROOT / "notebooks" / "sample" / "engine"


def _py(code: str, tmp_path: Path, **env: str):
    """Run ``code`` in a fresh interpreter with tinyserve importable; return its JSON stdout."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TINYSERVE_")}
    full.update(PYTHONPATH=str(ENGINE), PYTHONDONTWRITEBYTECODE="1", **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


CAPS = ("import json; from tinyserve.srt.utils import get_device_capability, is_sm90_supported, "
        "is_sm100_supported, is_sm120_supported\n"
        "print(json.dumps([get_device_capability(), is_sm90_supported(), is_sm100_supported(), "
        "is_sm120_supported()]))")


def _fake_nvidia_smi(tmp_path: Path, compute_cap: str) -> str:
    """A stand-in nvidia-smi printing the documented ``--query-gpu=compute_cap --format=csv,noheader`` output."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncase \"$*\" in\n"
                   f"  *compute_cap*) printf '{compute_cap}\\n{compute_cap}\\n' ;;\n"
                   "  *) echo '| NVIDIA-SMI 580.00  Driver Version: 580.00  CUDA Version: 13.0 |' ;;\nesac\n")
    exe.chmod(0o755)
    return f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_capability_without_gpu_comes_from_the_environment(tmp_path):
    if subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True).returncode == 0:
        pytest.skip("this machine has nvidia-smi; the environment fallback is not reached")
    assert _py(CAPS, tmp_path) == [None, False, False, False]
    assert _py(CAPS, tmp_path, TINYSERVE_DEVICE_CAPABILITY="12.0") == [[12, 0], False, False, True]
    assert _py(CAPS, tmp_path, TINYSERVE_DEVICE_CAPABILITY="10.0") == [[10, 0], False, True, False]
    assert _py(CAPS, tmp_path, TINYSERVE_DEVICE_CAPABILITY="9.0") == [[9, 0], True, False, False]
    assert _py(CAPS, tmp_path, TINYSERVE_DEVICE_CAPABILITY="junk") == [None, False, False, False]


def test_nvidia_smi_wins_over_the_environment(tmp_path):
    path = _fake_nvidia_smi(tmp_path, "12.0")
    got = _py(CAPS, tmp_path, PATH=path, TINYSERVE_DEVICE_CAPABILITY="10.0")
    assert got == [[12, 0], False, False, True]


NEMOTRON = ("import json, sys; from tinyserve.srt.server_args import ServerArgs\n"
            "a = ServerArgs(model_path=sys.argv[1] if len(sys.argv) > 1 else {model!r})\n"
            "print(json.dumps([a.attention_backend, a.moe_runner_backend, a.quantization, "
            "a.disable_overlap_schedule]))")


@pytest.mark.parametrize("cap, expected", [
    # sm100: the model-specific sm100 default fires.
    ("10.0", ["flashinfer", "flashinfer_cutlass", "modelopt_fp4", True]),
    # sm120 (RTX PRO 6000): the sm100 default does not fire; the generic sm120 fallback also gives flashinfer.
    ("12.0", ["flashinfer", "flashinfer_cutlass", "modelopt_fp4", True]),
    # Hopper: generic default fa3.
    ("9.0", ["fa3", "flashinfer_cutlass", "modelopt_fp4", True]),
])
def test_nemotron_h_defaults_by_architecture(tmp_path, cap, expected):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["NemotronHForCausalLM"], "num_attention_heads": 32,
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}))
    code = NEMOTRON.format(model=str(model))
    assert _py(code, tmp_path, TINYSERVE_DEVICE_CAPABILITY=cap, TINYSERVE_ASSUME_PACKAGES="flashinfer") == expected


def test_sm120_without_flashinfer_falls_back_to_triton(tmp_path):
    code = ("import json; from tinyserve.srt.server_args import resolved_defaults\n"
            "print(json.dumps(resolved_defaults()['attention_backend']))")
    assert _py(code, tmp_path, TINYSERVE_DEVICE_CAPABILITY="12.0") == "triton"
    assert _py(code, tmp_path, TINYSERVE_DEVICE_CAPABILITY="12.0", TINYSERVE_ASSUME_PACKAGES="flashinfer") == \
        "flashinfer"


def test_server_args_is_big_and_says_it_is_a_stand_in():
    text = (ENGINE / "tinyserve" / "srt" / "server_args.py").read_text()
    assert len(text.splitlines()) >= 400
    assert "stand-in" in text.split('"""')[1] and "not a real engine" in text.split('"""')[1]
