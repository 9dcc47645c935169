"""POST a JSON body to a URL on the engine's host where curl is missing: prints the answer, then the HTTP
status (0 when no answer). Run as ``python3 -c PROGRAM URL BODY``."""
import sys
import urllib.error
import urllib.request

req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode() or None, method="POST",
                             headers={"Content-Type": "application/json"})
try:
    resp = urllib.request.urlopen(req, timeout=600)
    print(resp.read().decode(errors="replace"))
    print(resp.status, end="")
except urllib.error.HTTPError as x:
    print(x.read().decode(errors="replace"))
    print(x.code, end="")
except OSError as x:
    print(x)
    print(0, end="")
