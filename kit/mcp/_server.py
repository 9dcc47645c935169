"""The MCP server on the SDK's low-level ``Server``: the listed tools are exactly the table's rows the Policy
allows, with their schemas as written. A call: tool looked up among the allowed ones (else answered as
unknown), arguments validated against its schema, host checked, paths resolved, the kit function run in a
worker thread under the per-call timeout, the result paged, redacted and capped (``_result.py``). Errors come
back as results with ``ok: false`` and one line, never a traceback."""
from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server

import kit.runs  # noqa: F401  loading the catalogue installs its writer: the analyses this server runs are recorded
from kit import __version__
from kit.errors import KitError, UsageError
from kit.mcp._policy import DEFAULT_PAGE, Policy
from kit.mcp._resources import PROMPT, prompt_text, read_resource, resources
from kit.mcp._result import envelope, failure
from kit.mcp._tools import available

NAME = "decode-kit"


def build_server(policy: Policy, session: Path | None = None) -> Server:
    """A low-level MCP server over the tools ``policy`` allows; ``session``: the resources' session
    (default: the bundled sample, when this is a checkout that has it)."""
    tools = {t.name: t for t in available(policy)}

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_listed(t, policy) for t in tools.values()])

    async def call_tool(ctx, params) -> types.CallToolResult:
        out = await call(policy, tools, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out, indent=1))],
                                    structured_content=out, is_error=not out["ok"])

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources(session))

    async def read(ctx, params) -> types.ReadResourceResult:
        uri, mime, text = read_resource(session, str(params.uri))
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[PROMPT])

    async def get_prompt(ctx, params) -> types.GetPromptResult:
        text = prompt_text(params.name, session, policy, [t.name for t in tools.values()])
        return types.GetPromptResult(description=PROMPT.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

    return Server(NAME, version=__version__, instructions=_INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources, on_read_resource=read,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


_INSTRUCTIONS = ("decode-kit's analyses of LLM-serving decode performance. Every result carries 'provenance' "
                 "(where each figure came from), 'trust' (usable / degraded / unreliable / undecided / not assessed, "
                 "with reasons) and 'warnings': repeat a figure only with its trust verdict and reasons. Long "
                 "tables are paged ('page.next_offset'). Tools that write or run code are listed only when the "
                 "server was started to allow them.")


def _listed(t, policy: Policy) -> types.Tool:
    return types.Tool(name=t.name, description=f"[{t.mode}] {t.description}", input_schema=t.schema(policy),
                      annotations=types.ToolAnnotations(read_only_hint=t.mode == "read",
                                                        destructive_hint=t.mode != "read",
                                                        open_world_hint=t.mode == "run"))


MAX_STRANDED = 8   # calls past their timeout whose threads still run; more refuse new calls (threads bounded)
_stranded = 0
_stranded_lock = threading.Lock()


async def call(policy: Policy, tools: dict, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call, checked, timed out and wrapped as a JSON-ready envelope. The function, paging, redaction
    and serialisation run in one worker thread under the per-call timeout; a call past it is answered and its
    thread left to finish; while ``MAX_STRANDED`` such threads still run, new calls are refused."""
    tool = tools.get(name)
    if tool is None:  # not in the table, or not allowed on this server: the same answer
        return failure(name, f"unknown tool {name!r}", refused=True)
    schema = tool.schema(policy)
    try:
        jsonschema.validate(args, schema)
        if "host" in args:
            policy.host(args["host"], tool.mode)
        args = policy.resolve(schema["properties"], args)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
        return failure(name, f"{where}: {exc.message[:300]}", refused=True)
    except KitError as exc:
        return failure(name, _one_line(str(exc)), refused=True)
    offset, limit = args.pop("offset", 0), args.pop("limit", DEFAULT_PAGE)
    if _stranded >= MAX_STRANDED:
        return failure(name, f"busy: {_stranded} earlier calls are still running past their timeout; try later")

    state = {"ended": False, "abandoned": False}

    def work() -> dict[str, Any]:
        global _stranded
        try:
            return envelope(name, tool.func(policy, **args), offset=offset, limit=limit, cap=policy.max_output)
        finally:
            with _stranded_lock:
                state["ended"] = True
                if state["abandoned"]:  # answered at the timeout already: this thread has now ended
                    _stranded -= 1

    try:
        with anyio.fail_after(policy.timeout_s):
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except TimeoutError:
        _strand(state)
        return failure(name, f"gave no answer within the server's per-call timeout of {policy.timeout_s:g} s")
    except KitError as exc:
        return failure(name, _one_line(str(exc)), refused=isinstance(exc, UsageError))
    except Exception as exc:  # noqa: BLE001 - a tool result, not a crashed server
        return failure(name, _one_line(f"{type(exc).__name__}: {exc}"))


def _strand(state: dict) -> None:
    """Count a call answered at its timeout whose thread still runs (``work`` uncounts it when it ends)."""
    global _stranded
    with _stranded_lock:
        if not state["ended"]:
            state["abandoned"] = True
            _stranded += 1


def _one_line(text: str) -> str:
    return " ".join(text.split())[:1000]


# ---------------------------------------------------------------------------------------- serving
def serve_stdio(policy: Policy, session: Path | None = None) -> None:
    """Serve on this process's stdin/stdout until the client closes them (what MCP clients start)."""
    server = build_server(policy, session)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


SESSION_IDLE_S = 600.0   # an HTTP session unused this long is closed (its memory freed)
MAX_SESSIONS = 64         # open HTTP sessions at once; more are refused by the SDK


def serve_http(policy: Policy, port: int, session: Path | None = None, *, ready=None,
               token_file: Path | None = None, session_idle_s: float = SESSION_IDLE_S) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:PORT/mcp`` (never another interface; DNS-rebinding
    protection on: Host and Origin must name the loopback), every request carrying the server's bearer
    token. The token is made at start and written to ``token_file`` (mode 0600; default a new 0700
    directory of its own, removed at exit): another local user cannot call a tool, though the port is
    open to every process of the machine. ``port=0`` takes a free port; ``ready(url, token_file)`` is
    called once it listens. Sessions idle for ``session_idle_s`` are closed, at most ``MAX_SESSIONS``."""
    token = secrets.token_urlsafe(32)
    own_dir = None
    if token_file is None:
        own_dir = Path(tempfile.mkdtemp(prefix="kit-mcp-"))  # 0700
        token_file = own_dir / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    app = build_server(policy, session).streamable_http_app(host="127.0.0.1", session_idle_timeout=session_idle_s,
                                                            max_sessions=MAX_SESSIONS)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    config = uvicorn.Config(_Bearer(app, token), log_level="warning", lifespan="on")

    def forget() -> None:
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn re-raises a SIGTERM/SIGINT once it has shut down: the token goes first
            with super().capture_signals():
                try:
                    yield
                finally:
                    forget()

    if ready is not None:
        ready(url, token_file)
    try:
        Server(config).run(sockets=[sock])
    finally:
        forget()


class _Bearer:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` is answered 401 before
    the MCP app sees it (compared in constant time)."""

    def __init__(self, app, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "kit mcp: this server needs its bearer token (Authorization: Bearer ...)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
