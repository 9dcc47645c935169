"""kit.source and notebook 02 against the real source of SGLang and vLLM, as published on PyPI.

The wheels are downloaded at test time (``pip download --no-deps``) into the git-ignored
``.kit-cache/engines/`` and only their ``.py`` files are unpacked. This machine has no GPU: the
folder ``gpu_standin/`` is put first on the engine's PYTHONPATH, so ``torch.cuda`` reports compute
capability 12.0 (RTX PRO 6000 Blackwell) or 10.0 (B200) and the engines' other binary dependencies
are inert stand-ins; the engines' own code runs as published. Skips, saying why, when the package
registry cannot be reached.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import kit
import kit.source
from kit import report
from kit.ledger import LEDGER_ENV, Ledger
from tests.conftest import ROOT

STANDIN = Path(__file__).resolve().parent / "gpu_standin"
CACHE = ROOT / ".kit-cache" / "engines"
NOTEBOOKS = ROOT / "notebooks"


def engine(name: str, version: str) -> Path:
    """The unpacked ``.py`` tree of ``name==version`` (downloaded once per checkout)."""
    tree = CACHE / f"{name}-{version}"
    if (tree / name).is_dir():
        return tree
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        try:
            res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                  "-q", "-d", str(wheels), f"{name}=={version}"],
                                 capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip download {name}=={version}: the package registry did not answer in 600 s")
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
        if res.returncode != 0 or not found:
            why = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
            pytest.skip(f"cannot download {name}=={version} from the package registry: {why}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-{version}.", dir=CACHE))
    with zipfile.ZipFile(found[0]) as z:
        z.extractall(tmp, [n for n in z.namelist() if n.endswith(".py")])
        # the wheel's compiled modules (vllm._C ...) are not unpacked: the stand-in answers for them
        binary = sorted({n.split(".")[0].replace("/", ".") for n in z.namelist() if n.endswith(".so")})
    (tmp / "binary_modules.txt").write_text("\n".join(binary) + "\n")
    try:
        os.rename(tmp, tree)  # atomic; another test session may have won the race
    except OSError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return tree


def standin_env(tree: Path, capability: str) -> dict:
    binary = (tree / "binary_modules.txt").read_text().split()
    return {"PYTHONPATH": os.pathsep.join([str(STANDIN), str(tree)]), "KIT_STANDIN_CAPABILITY": capability,
            "KIT_STANDIN_MODULES": ",".join(binary)}


@pytest.mark.parametrize("version", ["0.5.4", "0.5.6", "0.5.8", "0.5.9"])
def test_sglang_sm100_predicate_followed_and_evaluated(version):
    """From server_args.py, ``is_sm100_supported`` is followed to ``srt/utils/common.py`` (a
    ``lru_cache(partial(...))`` assignment, not a def) and evaluated by importing that file as the
    module it is: before the fix the probe loaded it under a made-up name and SGLang 0.5.9's
    ``@dataclass`` classes failed to import."""
    tree = engine("sglang", version)
    host = kit.connect("local")
    env = standin_env(tree, "12.0")
    server_args = kit.source.module_path(host, "sglang.srt.server_args", env=env)
    assert server_args == str(tree / "sglang" / "srt" / "server_args.py")
    pred = kit.source.definition(host, "is_sm100_supported", near=server_args, env=env)
    assert pred.path.endswith("sglang/srt/utils/common.py")
    assert pred.kind in ("function", "variable")  # a def in older releases, lru_cache(partial(...)) in newer ones
    answers = {cap: kit.source.evaluate(host, pred, env=standin_env(tree, cap)) for cap in ("12.0", "10.0", "9.0")}
    assert answers == {"12.0": False, "10.0": True, "9.0": False}
    sm120 = kit.source.definition(host, "is_sm120_supported", near=pred.path, env=env)
    assert kit.source.evaluate(host, sm120, env=env) is True


def test_sglang_consumer_of_the_sm100_default():
    tree = engine("sglang", "0.5.9")
    host = kit.connect("local")
    path = str(tree / "sglang" / "srt" / "server_args.py")
    uses = kit.source.find(host, path, "sm100_default_attention_backend")
    param = next(s for s in uses if s.kind == "parameter")
    assert kit.source.enclosing(host, path, param.line).qualname == "ServerArgs._handle_mamba_radix_cache"
    assert {s.value for s in uses if s.kind == "keyword"} >= {'"flashinfer"', '"triton"'}
    hits = kit.source.grep(host, path, "sm100_default_attention_backend=", context=1)
    assert len(hits) >= 4 and all(m.before and m.after for m in hits)


@pytest.mark.parametrize("capability,verdict,applies", [("12.0", "rejected", "does not apply"),
                                                        ("10.0", "confirmed", "applies")])
def test_backend_defaults_notebook_on_real_sglang(tmp_path, capability, verdict, applies):
    """Notebook 02 on SGLang 0.5.9's published source: the sm100 default does not decide the
    attention backend on compute capability 12.0 (RTX PRO 6000), and does on 10.0 (B200)."""
    tree = engine("sglang", "0.5.9")
    capture = tmp_path / "gpus.csv"
    capture.write_text("index, name, memory.total [MiB], compute_cap, driver_version\n"
                       f"0, stand-in GPU, 97887 MiB, {capability}, 580.126.20\n")
    ledger_path = tmp_path / "ledger.json"
    nb, run = report.execute_notebook(
        NOTEBOOKS / "02_backend_defaults.ipynb", cwd=NOTEBOOKS,
        parameters={"session": "sample", "host": "local", "engine_path": [str(STANDIN), str(tree)],
                    "engine_module": "sglang.srt.server_args", "gpu_capture": str(capture),
                    "capability_env": "KIT_STANDIN_CAPABILITY"},
        env={LEDGER_ENV: str(ledger_path)})
    assert run.ok, run.error
    h3 = Ledger.open(ledger_path)["H3"]
    assert h3.verdict == verdict and h3.numbers["is_sm100_supported"] is (verdict == "confirmed")
    assert f"{applies} on compute capability {capability}" in h3.evidence
    assert "ServerArgs._handle_mamba_radix_cache" in h3.evidence and "common.py:258" in h3.evidence
    assert "flashinfer" in h3.numbers["sm100_defaults"] and "triton" in h3.numbers["sm100_defaults"]
    kinds = {p["role"]: p["kind"] for p in h3.provenance}
    assert kinds["engine source"] == "third-party"
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert f"is_sm100_supported() on compute capability {capability}: {verdict == 'confirmed'}" in text


@pytest.mark.parametrize("version", ["0.10.2", "0.11.0"])
def test_vllm_blackwell_default_backend_source(version):
    """vLLM's CUDA platform prefers FlashInfer on compute capability 10.0: the line is found, its
    enclosing method named, and the platform's capability check evaluated for 12.0 and 10.0."""
    tree = engine("vllm", version)
    host = kit.connect("local")
    env = standin_env(tree, "12.0")
    cuda = kit.source.module_path(host, "vllm.platforms.cuda", env=env)
    assert cuda == str(tree / "vllm" / "platforms" / "cuda.py")
    hits = kit.source.grep(host, cuda, "Prefer FlashInfer for Blackwell", regex=False, context=2)
    assert len(hits) == 1 and "is_device_capability(100)" in "".join(hits[0].after)
    scope = kit.source.enclosing(host, cuda, hits[0].line)
    assert scope.qualname.endswith("get_attn_backend_cls")
    plat = kit.source.definition(host, "NonNvmlCudaPlatform", near=cuda, env=env)
    assert plat.kind == "class"
    answers = {cap: kit.source.evaluate(host, plat, attribute="is_device_capability", args=(100,),
                                        env=standin_env(tree, cap)) for cap in ("12.0", "10.0")}
    assert answers == {"12.0": False, "10.0": True}
