#!/usr/bin/env bash
# Install the system programs the tests need (sshd, chromium, npm, ripgrep) when root and missing.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v rg >/dev/null 2>&1 || need+=(ripgrep)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "system_deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "system_deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
