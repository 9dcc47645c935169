"""Shipped to a host by kit.env.fingerprint and run by ``Host.python`` (with the host's Python, stdlib
only): the versions of Python, torch, the engines and NCCL installed there. The kit appends the call
``probe(ENGINES)`` (ENGINES: each engine of its registry with its distribution names, as a list of
(key, [names])), whose JSON-able value comes back."""
import importlib.metadata as md
import platform

DISTRIBUTIONS = (("torch", ["torch"]),
                 ("flashinfer", ["flashinfer-python", "flashinfer"]),
                 ("nccl_wheel", ["nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"]))


def installed(dists):
    for d in dists:
        try:
            return md.version(d)
        except Exception:  # not installed, or a broken distribution: try the next name
            pass
    return None


try:  # the host may have no torch: said in torch_error when its distribution is installed
    import torch
except Exception as exc:
    torch, TORCH_ERROR = None, (type(exc).__name__ + ": " + str(exc))[:200]


def torch_versions(out):
    if torch is None:
        out["torch_error"] = TORCH_ERROR
        return
    out["torch_cuda"] = torch.version.cuda
    try:
        v = torch.cuda.nccl.version()
        out["torch_nccl"] = list(v) if isinstance(v, tuple) else v
    except Exception as exc:
        out["torch_nccl_error"] = str(exc)[:200]


def probe(engines=()):
    out = {"python": platform.python_version()}
    for key, dists in DISTRIBUTIONS:
        out[key] = installed(dists)
    out["engines"] = {key: installed(dists) for key, dists in engines}
    if out["torch"]:
        torch_versions(out)
    return out
