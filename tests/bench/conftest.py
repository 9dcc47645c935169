"""The live tests' servers, shared: the timed server factory."""
from tests.live.conftest import timed_server  # noqa: F401
