"""What a LiteRT golden bundle carries for LiteRT's own check: a plain-Python runner on the
Interpreter (numpy and ai_edge_litert only; the emulated ARM64 guest runs it as it is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.targets.golden_runner import write_runner

RUNNER = "run_litert.py"

# the runner's runtime part: the Interpreter as edgekit's session opens it (default XNNPACK
# delegate, one thread), falling back to the standalone runtime as the session does
LOADER = '''
try:
    from ai_edge_litert.interpreter import Interpreter

    RUNTIME = "LiteRT (ai_edge_litert Interpreter)"
except ImportError:  # the older standalone runtime, where that is what is installed
    from tflite_runtime.interpreter import Interpreter

    RUNTIME = "LiteRT (tflite_runtime Interpreter)"


def open_model(path):
    """The .tflite on one thread with its default (XNNPACK) delegate, as edgekit ran it."""
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    given = interpreter.get_input_details()[0]["index"]
    returned = interpreter.get_output_details()[0]["index"]

    def run(tensor):
        interpreter.set_tensor(given, tensor)
        interpreter.invoke()
        return interpreter.get_tensor(returned)

    return run
'''


def golden_files(root: Path, spec: dict[str, Any], artifact: Path) -> dict[str, str]:
    """The runner, written into the bundle at ``root``; {what it is: its path}."""
    path = write_runner(root, RUNNER, runtime="LiteRT's Interpreter", loader=LOADER)
    return {
        "the stage-3 tensors through LiteRT's Interpreter against the expected outputs "
        f"(numpy and ai-edge-litert only): `python {path} [BUNDLE]`, PASS or FAIL": path
    }
