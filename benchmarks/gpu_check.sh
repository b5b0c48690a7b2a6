#!/usr/bin/env bash
# The server rows on a machine with an NVIDIA GPU, in under 8 minutes: the baseline in torch on
# CUDA (synchronised before every clock read) and the .onnx artifacts on onnxruntime's CUDA and
# TensorRT execution providers, interleaved with the host CPU's rows, for MobileNetV2 and
# ResNet-50 (random weights: latency only). Writes benchmarks/GPU.md with the run's report.
#
#   bash benchmarks/gpu_check.sh            # needs the package registries (pip) on that machine
#
# TORCH_INDEX picks the CUDA build of torch==2.13.0 (onnxruntime-gpu 1.31.1 wants CUDA 13 and
# cuDNN 9; TensorRT's libraries must be on LD_LIBRARY_PATH for the TensorRT rows).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-gpu}
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cu130}
OUT=${OUT:-benchmarks/GPU.md}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip==26.3
"$VENV/bin/pip" install --quiet --index-url "$TORCH_INDEX" torch==2.13.0
# the cuda extra instead of the cpu one: onnxruntime-gpu alone (the lock's onnxruntime pin is a
# constraint and installs nothing by itself); pipcheck fails if both builds are there
"$VENV/bin/pip" install --quiet -c requirements.lock -e '.[cuda]'
"$VENV/bin/python" -m edgekit.common.pipcheck
RUNS=$(mktemp -d)
"$VENV/bin/edgekit" doctor --json > "$RUNS/doctor.json"
timeout 420 "$VENV/bin/edgekit" run --model mobilenet_v2,resnet50 --data synthetic:64 \
  --target onnx --recipe fp32,fp16 --device cpu,server-cuda,server-tensorrt --no-profile \
  --rounds 6 --runs-dir "$RUNS" --history "$RUNS/history.sqlite" --json > "$RUNS/summary.json" ||
  test $? -eq 1 # a failed row (TensorRT without its libraries) is reported, not fatal
RUN_DIR=$("$VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_dir"])' \
  "$RUNS/summary.json")
{
  echo "# Server rows on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo
  echo "Made by \`bash benchmarks/gpu_check.sh\` on $(date -u +%Y-%m-%d)."
  echo
  cat "$RUN_DIR/report.md"
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT (run: $RUN_DIR)"
