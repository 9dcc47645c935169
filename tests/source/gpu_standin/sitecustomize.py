"""A stand-in for a GPU machine's Python, for tests of real engine source on a machine without GPU.

Put this folder first on PYTHONPATH with ``KIT_STANDIN_CAPABILITY=12.0`` (or ``10.0`` ...): Python
runs this file at start-up. ``torch.cuda`` then reports one CUDA GPU of that compute capability
(CUDA 12.9), and every other package the engine imports that is not installed here (numpy, triton,
zmq, ...) is an inert stand-in: attribute access, calls, subclassing and decorators all work and do
nothing. Only the answer to "which GPU is this?" is made up; the engine's own code runs as written.
"""
import importlib.abc
import importlib.machinery
import os
import sys
import types

_CAP = tuple(int(x) for x in os.environ.get("KIT_STANDIN_CAPABILITY", "9.0").split("."))
# The engines' hard dependencies that this machine may lack, and (KIT_STANDIN_MODULES, comma-separated
# dotted names) an engine's own compiled modules, which a test unpacking only .py files leaves out. Packages
# an engine only probes for (``find_spec("torch_npu")``, flashinfer ...) are NOT stood in for: they stay
# absent, as on a plain CUDA host.
_STAND_IN = set(os.environ.get("KIT_STANDIN_MODULES", "").split(",")) | {
    "torch", "triton", "zmq", "orjson", "psutil", "pybase64", "PIL", "starlette", "fastapi", "uvicorn", "uvloop",
    "transformers", "sgl_kernel", "safetensors", "huggingface_hub", "einops", "msgspec", "cloudpickle",
    "prometheus_client", "aiohttp", "sentencepiece", "tiktoken", "openai", "partial_json_parser",
    "compressed_tensors", "xgrammar", "outlines", "blake3", "cbor2", "gguf", "numba", "setproctitle",
    "llguidance", "interegular", "torchvision", "torchaudio", "decord", "datasets", "modelscope", "hf_transfer",
    "pydantic", "tqdm", "regex", "lark", "jsonschema", "pynvml", "cachetools", "diskcache", "mistral_common",
    "tokenizers", "torchao", "IPython", "pyzmq", "sentry_sdk", "opentelemetry", "python_multipart", "watchfiles",
    "depyf", "lm_format_enforcer", "soundfile", "librosa", "scipy", "grpc", "google", "smg_grpc_proto",
    "anthropic", "timm", "av", "pillow", "nvtx", "cuda", "nixl", "mooncake", "quack", "apache_tvm_ffi", "tvm_ffi",
    "flash_attn", "xformers", "ninja", "dill", "msgpack", "py_cpuinfo", "cpuinfo", "filelock", "fsspec", "yaml",
    "aiofiles", "httpx", "requests", "numpy", "packaging", "typing_extensions", "jinja2", "markupsafe"}


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            return args[0]  # used as a decorator: keep the function
        return type.__call__(cls)

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, item, value):
        pass

    def __contains__(cls, item):
        return False

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    __index__ = __int__

    def __float__(cls):
        return 0.0

    def __len__(cls):
        return 0

    def __mro_entries__(cls, bases):
        return (cls,)


_OPS = ("neg", "pos", "abs", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
        "mod", "pow", "lt", "le", "gt", "ge", "and", "rand", "xor", "invert", "matmul", "lshift", "rshift")
for _op in _OPS:
    setattr(_Meta, f"__{_op}__", lambda cls, *a: cls)


def _make(name):
    ops = {f"__{op}__": (lambda self, *a: self) for op in _OPS}
    return _Meta(name.rsplit(".", 1)[-1], (), {**ops,
        "__init__": lambda self, *a, **k: None,
        "__hash__": lambda self: id(self), "__eq__": lambda self, o: self is o,
        "__int__": lambda self: 0, "__float__": lambda self: 0.0, "__index__": lambda self: 0,
        "__enter__": lambda self: self, "__exit__": lambda self, *a: False,
        "__getitem__": lambda self, k: self, "__len__": lambda self: 0, "__setitem__": lambda self, k, v: None,
        "__contains__": lambda self, k: False,
        "__getattr__": lambda self, n: _make(n) if not n.startswith("__") else (_ for _ in ()).throw(AttributeError(n)),
        "__call__": lambda self, *a, **k: _make("result")(),
        "__iter__": lambda self: iter(()),
        "__bool__": lambda self: False,
        "__init_subclass__": classmethod(lambda cls, **k: None),
    })


_ABSENT = {"torch": {"npu", "musa", "mlu", "hpu"}}  # other vendors' devices: torch has no such attribute
_OFF = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") or name in _ABSENT.get(self.__name__, ()):
            raise AttributeError(name)
        if self.__name__ == "torch" and name in ("xpu", "mps"):
            return _OFF
        value = _make(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _StandInModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        module.__version__ = "0.0.0+standin"
        if module.__name__ == "torch":
            module.__version__ = "2.9.0"
        if module.__name__ == "torch.version":
            module.cuda, module.hip = "12.9", None
        if module.__name__ == "torch.cuda":
            module.is_available = lambda: True
            module.get_device_capability = lambda device=None: _CAP
            module.device_count = lambda: 1
            module.get_device_name = lambda device=None: f"stand-in GPU sm{_CAP[0]}{_CAP[1]}"
        if module.__name__ == "dill":
            import pickle

            module.dumps, module.loads = pickle.dumps, pickle.loads
        if module.__name__ == "triton":  # triton's view of the GPU agrees with torch's
            target = types.SimpleNamespace(backend="cuda", arch=_CAP[0] * 10 + _CAP[1], warp_size=32)
            active = types.SimpleNamespace(get_current_target=lambda: target)
            module.runtime = types.SimpleNamespace(driver=types.SimpleNamespace(active=active))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if not any(".".join(parts[:i]) in _STAND_IN for i in range(1, len(parts) + 1)):
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


for _name in ("torch", "torch.version", "torch.cuda"):  # installed or not: the GPU answer is ours
    sys.modules.pop(_name, None)
    _spec = importlib.machinery.ModuleSpec(_name, _Loader(), is_package=True)
    _mod = _Loader().create_module(_spec)
    _mod.__spec__ = _spec
    _Loader().exec_module(_mod)
    sys.modules[_name] = _mod
sys.modules["torch"].version = sys.modules["torch.version"]
sys.modules["torch"].cuda = sys.modules["torch.cuda"]
sys.meta_path.append(_Finder())  # last: only what is not installed here is stood in for
