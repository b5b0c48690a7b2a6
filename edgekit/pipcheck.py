"""``pip check``, with the one requirement edgekit knowingly leaves out: onnx2torch's torchvision
(used by its NonMaxSuppression/RoiAlign converters only; no torchvision installs beside the CPU
torch build, and edgekit gives onnx2torch a stand-in). Any other broken requirement fails."""

from __future__ import annotations

import subprocess
import sys

KNOWN = "onnx2torch 1.5.15 requires torchvision, which is not installed."


def main() -> int:
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    problems = [line for line in done.stdout.splitlines() if line.strip() and line != KNOWN]
    for line in problems:
        print(line)
    if done.returncode != 0 and not problems and KNOWN not in done.stdout:
        print(done.stdout + done.stderr)
        return done.returncode
    print("pip check: no broken requirements" + (" (but onnx2torch's torchvision, known)"
          if KNOWN in done.stdout else ""))  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
