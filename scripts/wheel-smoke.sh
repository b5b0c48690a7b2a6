#!/usr/bin/env bash
# edgekit as a user installs it: the sdist and the wheel (`python -m build`), the wheel installed
# non-editable into a fresh venv with the lock as constraints, and from there, away from the
# checkout (so `import edgekit` can only be the wheel's): pip check, every command's --help,
# `import edgekit.cluster`, and an export plus bench of the default model with an empty edgekit
# cache (the weights must come from the wheel). It needs nothing of the project's venv (`build`
# comes into a small venv of its own, at the lock's version), so .ci/setup (nightly) starts it beside
# `make install`, and both take from pip's cache. A few minutes.
#
#   bash scripts/wheel-smoke.sh            # PYTHON as for make
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf 'wheel-smoke: %s (%ds)\n' "$1" "$SECONDS"; }

step "python -m build"
"$PYTHON" -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install --quiet -c requirements.lock build
# from a copy of what a fresh clone holds for it (without the checkout's *.egg-info)
"$PYTHON" scripts/source_tree.py "$work/source"
"$work/build-venv/bin/python" -m build --outdir "$work/dist" "$work/source" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; exit 1; }
wheels=("$work"/dist/edgekit_bench-*.whl)
step "install ${wheels[0]##*/}[cpu] into a fresh venv"
"$PYTHON" -m venv "$work/venv"
bin=$work/venv/bin
"$bin/pip" install --quiet --upgrade pip==26.3
# --no-compile: byte-compiling all of torch, tensorflow and ray took two of the three minutes;
# Python compiles what the smoke imports as it imports it
"$bin/pip" install --quiet --no-compile -c requirements.lock "${wheels[0]}[cpu]"

cd "$work"
export EDGEKIT_CACHE=$work/cache
"$bin/python" -m edgekit.common.pipcheck
"$bin/python" - "$checkout" <<'EOF'
import sys
from pathlib import Path

import edgekit
import edgekit.cluster  # noqa: F401  (once missing from the wheel)

import edgekit.quantize
import edgekit.targets  # the top-level targets/ and quantize/ of the checkout, inside the wheel

for module in (edgekit, edgekit.targets, edgekit.quantize):
    where = Path(module.__file__).resolve()
    assert Path(sys.prefix) in where.parents, f"{module.__name__} from {where}, not the wheel"
    assert Path(sys.argv[1]) not in where.parents, f"{module.__name__} from the checkout: {where}"
where = Path(edgekit.__file__).resolve()
print(f"wheel-smoke: edgekit {edgekit.__version__} from {where.parent}")
EOF

step "every command's --help, an export of the default model (onnx, fp32), then its bench"
# the console script's own --help as a user runs it, then every command's in one process
# (click's CliRunner over edgekit.cli.commands, so a new command is never left out): a process
# per command spent its time starting Python, twice (the console script supervises a child)
"$bin/edgekit" --help | grep -q "Usage: edgekit" ||
  { echo "wheel-smoke: 'edgekit --help' printed no usage"; exit 1; }
"$bin/python" - <<'EOF'
import sys

from typer.testing import CliRunner

from edgekit.cli import app, commands

runner = CliRunner()
paths = commands(groups=True)
for path in paths:
    shown = f"edgekit {path}".strip()
    result = runner.invoke(app, [*path.split(), "--help"], prog_name="edgekit")
    if result.exit_code != 0:
        sys.exit(f"wheel-smoke: '{shown} --help' failed ({result.exit_code}): {result.output}")
    if "Usage: edgekit" not in result.output:
        sys.exit(f"wheel-smoke: '{shown} --help' printed no usage")
print(f"wheel-smoke: {len(paths)} commands answered --help")
EOF
"$bin/edgekit" export --target onnx --recipe fp32 --output "$work/artifacts"
"$bin/edgekit" bench "$work"/artifacts/*.onnx --rounds 2 --min-runs 5 --min-seconds 0.05 \
  --no-noise-guard
step "passed"
