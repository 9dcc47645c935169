"""Per-user private directories on a host, for everything the kit writes there (engine logs, pids, profiles).

GPU hosts are shared: a fixed name in a world-writable directory (``/tmp/kit-live``) fails for the second
user and lets another user plant a symlink there. The kit's directory is ``${TMPDIR:-/tmp}/kit-<uid>``,
made with ``mkdir -m 700`` (atomic) and checked with ``lstat`` semantics: a directory, not a symlink,
owned by this user, mode 0700 (one of this user's that is only too open, never writable by others, is
tightened). Anything else is never used: the kit warns, naming the path and its owner, and uses a fresh
``mktemp -d`` directory instead, so a planted name can neither redirect nor block it. Sub-directories
are made and checked the same way (one of this user's inside the 0700 directory is tightened). In the
sticky ``/tmp``, nobody but the owner (and root) can rename or replace the directory once checked.
"""
from __future__ import annotations

import logging
import re

from kit.errors import RemoteError
from kit.util import quote as _q

log = logging.getLogger("kit.remote")

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")

# Prints the directory on the last line of stdout; "KITPLANTED <path> <owner> <mode> <type>" before it
# when the usual name was refused.
_SCRIPT = r'''
u=$(id -u) || exit 1
mine() { [ -d "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %u -- "$1")" = "$u" ]; }
ok() { mine "$1" && [ "$(stat -c %a -- "$1")" = 700 ]; }
b=${TMPDIR:-/tmp}; b=${b%/}; [ -n "$b" ] || b=/tmp
d="$b/kit-$u"
mkdir -m 700 -- "$d" 2>/dev/null
if mine "$d" && [ $(( 0$(stat -c %a -- "$d") & 022 )) = 0 ]; then chmod 700 -- "$d"; fi
if ! ok "$d"; then
  echo "KITPLANTED $d $(stat -c '%U %a %F' -- "$d" 2>/dev/null || echo '? ? missing')"
  d=$(mktemp -d "$b/kit-$u.XXXXXXXX") || exit 1
  ok "$d" || { echo "kit: mktemp made $d but it is not private" >&2; exit 1; }
fi
for s in SUBS; do
  d="$d/$s"
  mkdir -m 700 -- "$d" 2>/dev/null
  # inside a 0700 directory of this user, only this user (or root) made it: a 0755 one is tightened
  if mine "$d"; then chmod 700 -- "$d"; fi
  ok "$d" || { echo "kit: $d is not a private directory of uid $u: $(stat -c '%U %a %F' -- "$d" 2>&1)" >&2; exit 1; }
done
printf '%s\n' "$d"
'''


def private_dir(host, sub: str = "") -> str:
    """This user's private directory on ``host``, with ``sub`` (``/`` between levels) made inside it; cached
    per host object. RemoteError naming the host if it cannot be made safely."""
    parts = [p for p in sub.split("/") if p]
    bad = [p for p in parts if not _NAME.match(p) or p in (".", "..")]
    if bad:
        raise RemoteError(f"{host.name}: private_dir: {sub!r} is not a plain relative name "
                          f"(letters, digits, '.', '_', '-')", host=host.name)
    cache = host.__dict__.setdefault("_private_dirs", {})
    key = "/".join(parts)
    if key in cache:
        return cache[key]
    script = _SCRIPT.replace("SUBS", " ".join(_q(p) for p in parts))
    res = host.run(script, timeout=30)
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    if not res.ok or not lines or not lines[-1].startswith("/"):
        raise RemoteError(f"{host.name}: cannot make a private directory for the kit "
                          f"({(res.stderr.strip() or res.stdout.strip() or f'exit {res.exit_code}')[:300]})",
                          host=host.name)
    for line in lines[:-1]:
        if line.startswith("KITPLANTED "):
            _, path, owner, mode, *kind = line.split()
            log.warning("%s: %s is not this user's private directory (owner %s, mode %s, %s): not used; "
                        "the kit writes under %s instead", host.name, path, owner, mode, " ".join(kind),
                        lines[-1].rsplit("/", len(parts))[0] if parts else lines[-1])
    cache[key] = lines[-1]
    return lines[-1]
