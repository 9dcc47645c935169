"""The host options shared by every command-line entry that reaches a host: the ``kit`` CLI
sub-commands and the ``%%remote`` cell magic read the same table, so flags and help cannot drift."""
from __future__ import annotations

from typing import Any, Callable

# (flags, argparse keyword arguments). ``--host`` is the CLI's way of naming the target; the magic
# takes the target as its first positional argument instead.
HOST_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("-i", "--identity"), {"default": None, "help": "private key file"}),
    (("--known-hosts",), {"default": None,
                          "help": "known_hosts file to trust (instead of ~/.ssh/known_hosts)"}),
    (("--trust",), {"default": None, "choices": ["strict", "accept-new"],
                    "help": "strict (default): refuse unknown host keys; "
                            "accept-new: record them in the kit's known_hosts"}),
    (("--no-ssh-config",), {"action": "store_true", "help": "do not read ~/.ssh/config"}),
)


def add_host_options(add_argument: Callable[..., Any], *, short_identity: bool = True) -> None:
    """Declare the host options through ``add_argument`` (``parser.add_argument``, or a collector
    for the magic's decorators). ``short_identity=False`` leaves ``-i`` free (``kit source grep -i``)."""
    for flags, kw in HOST_OPTIONS:
        if not short_identity:
            flags = tuple(f for f in flags if f != "-i")
        add_argument(*flags, **kw)


def connect_options(target: str, args: Any) -> dict:
    """The :func:`kit.connect` options that parsed host options ask for (nothing for ``"local"``)."""
    opts: dict = {}
    if target == "local":
        return opts
    if getattr(args, "identity", None):
        opts.update(key_filename=args.identity, look_for_keys=False, allow_agent=False)
    if getattr(args, "known_hosts", None):
        opts["known_hosts"] = args.known_hosts
    if getattr(args, "trust", None):
        opts["trust"] = args.trust
    if getattr(args, "no_ssh_config", False):
        opts["ssh_config"] = False
    return opts
