#!/usr/bin/env bash
# Install the system programs decode-kit needs, when root and missing (Debian/Ubuntu, apt).
#   tools/system_deps.sh report   npm (vendors the offline report assets)
#   tools/system_deps.sh pdf      + chromium (kit report --pdf prints the pages with it)
#   tools/system_deps.sh test     + openssh-server/client (the tests' own sshd), chromium, ripgrep
set -euo pipefail
what=${1:-test}
need=()
command -v npm >/dev/null 2>&1 || need+=(npm)
[ "$what" = pdf ] && { command -v chromium >/dev/null 2>&1 || need+=(chromium); }
if [ "$what" = test ]; then
  [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v rg >/dev/null 2>&1 || need+=(ripgrep)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "system_deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "system_deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
