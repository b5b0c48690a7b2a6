"""Record the run tests/test_report.py reads: a real ``edgekit run`` of the default model on this
machine (onnx and tflite, fp32 and int8, the host CPU and the GPU accelerator), its
results.json copied to tests/data/results_recorded.json. tests/test_run.py fails when a fresh
run's results.json has another shape than this file: run this script again then.

    .venv/bin/python tests/data/record_results.py"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
EDGEKIT = str(Path(sys.executable).with_name("edgekit"))
RUN = ["run", "--model", "digits-mobilenet", "--data", "digits", "--target", "onnx,tflite",
       "--recipe", "fp32,int8", "--device", "cpu,gpu", "--threads", "1", "--rounds", "10",
       "--min-runs", "50", "--min-seconds", "0.3", "--plain-int8"]  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        command = [*RUN, "--runs-dir", str(runs), "--history", str(Path(tmp) / "h.sqlite")]
        subprocess.run([EDGEKIT, *command], check=True)
        [run_dir] = runs.iterdir()
        payload = json.loads((run_dir / "results.json").read_text())
    # compact, one row per line: the samples of every row would make it ten times longer
    rows = ",\n".join(json.dumps(row, separators=(",", ":")) for row in payload.pop("rows"))
    head = json.dumps(payload, separators=(",", ":"))[:-1]
    (HERE / "results_recorded.json").write_text(f'{head},\n"rows":[\n{rows}\n]}}\n')
    print(f"wrote {HERE / 'results_recorded.json'}")


if __name__ == "__main__":
    main()
