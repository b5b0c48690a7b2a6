#!/usr/bin/env bash
# Installs Mesa's Vulkan drivers (lavapipe, a software Vulkan device) from Debian's
# bookworm-backports, so the LiteRT GPU accelerator's real code path runs on a machine without a
# GPU. Mesa 25 is needed: bookworm's own Mesa 22 is too old for LiteRT's WebGPU-over-Vulkan path.
# It adds the backports suite to the machine's existing Debian source entry (no new host).
# Idempotent; needs root (CI and the development machines run as root). Skips quietly elsewhere.
set -euo pipefail
if [ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] && dpkg -s mesa-vulkan-drivers 2>/dev/null \
    | grep -q '^Version: 25'; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  if [ "${CI:-}" = true ]; then  # CI must have the GPU path: a skipped gpu test hides a regression
    echo "install-vulkan: not root or no apt-get, and CI=true needs the Vulkan driver" >&2
    exit 1
  fi
  echo "install-vulkan: not root or no apt-get; the GPU-delegate tests will be skipped" >&2
  exit 0
fi
sources=/etc/apt/sources.list.d/debian.sources
if [ -f "$sources" ] && ! grep -q 'bookworm-backports' "$sources"; then
  sed -i 's/^Suites: bookworm bookworm-updates$/Suites: bookworm bookworm-updates bookworm-backports/' "$sources"
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports \
  mesa-vulkan-drivers libvulkan1 vulkan-tools >/dev/null
