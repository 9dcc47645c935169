"""A child process that streams ``head -c SIZE /dev/zero`` from a host with ``run(stream=True)`` and
prints one JSON line: characters counted, exit code, the bounded output the Result kept, its RSS
before the stream and its peak RSS during it (peak reset after a warm-up through
/proc/self/clear_refs), wall time, and how many key exchanges paramiko completed during the stream.
Used by tests/remote/test_streams.py and bench/remote_memory.py.
Run as: python -c STREAM_PROBE '<connect options as JSON>' TARGET SIZE
"""
import json
import logging
import sys
import time

import kit

opts, target, size = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kex = [0]

class Kex(logging.Handler):
    def emit(self, record):
        if "Switch to new keys" in record.getMessage():
            kex[0] += 1

lg = logging.getLogger("paramiko.transport")
lg.setLevel(logging.DEBUG)
lg.addHandler(Kex())
lg.propagate = False

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

class Count:
    n = 0
    def write(self, s):
        self.n += len(s)
        return len(s)
    def flush(self):
        pass

host = kit.connect(target, **opts)
real, sys.stdout = sys.stdout, Count()
host.run("head -c 4000000 /dev/zero", stream=True, timeout=60)  # warm-up: every code path once
sys.stdout = Count()
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    reset = True
except OSError:
    reset = False
before, kex_before = status("VmRSS"), kex[0]
t0 = time.perf_counter()
res = host.run(f"head -c {size} /dev/zero; echo end >&2", stream=True, timeout=1800)
wall = time.perf_counter() - t0
counted, sys.stdout = sys.stdout.n, real
print(json.dumps({"chars": counted, "exit": res.exit_code, "stderr": res.stderr, "stdout_bytes": res.stdout_bytes,
                  "kept": len(res.stdout), "truncated": res.truncated, "rss_before": before,
                  "peak": status("VmHWM"), "peak_reset": reset, "wall": wall, "kex": kex[0] - kex_before}))
