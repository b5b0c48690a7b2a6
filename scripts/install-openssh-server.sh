#!/usr/bin/env bash
# Installs Debian's openssh-server, which the board tests (tests/test_board.py) run on loopback in
# a network namespace as a test board (scripts/loopback_board.py). Only the binary is used: no
# service is started or enabled. Idempotent; needs root (CI and the development machines run as
# root). Skips quietly elsewhere, except under CI=true.
set -euo pipefail
if [ -x /usr/sbin/sshd ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  if [ "${CI:-}" = true ]; then  # CI must drive a board: a skipped board test hides a regression
    echo "install-openssh-server: not root or no apt-get, and CI=true needs sshd" >&2
    exit 1
  fi
  echo "install-openssh-server: not root or no apt-get; the board tests will be skipped" >&2
  exit 0
fi
# policy-rc.d: the package's postinst must not start a system sshd on port 22
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  openssh-server >/dev/null
