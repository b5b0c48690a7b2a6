"""What an ExecuTorch golden bundle carries for ExecuTorch's own checks: a plain-Python runner
(numpy and ExecuTorch's runtime only; the emulated ARM64 guest runs it as it is), and
``program.bpte``, the .pte with every stage-3 input and its expected output bundled by
ExecuTorch's BundledProgram API (its runtimes verify it with no edgekit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.targets.golden_runner import write_runner

RUNNER = "run_executorch.py"
BUNDLED = "program.bpte"
METHOD = "forward"

# the runner's runtime part, in edgekit's session's order: the ``executorch.runtime`` pybindings
# (a pip executorch; they take torch tensors), else the torch-free ``executorch_numpy_runtime``
# (the emulated ARM64 guest's)
LOADER = '''
try:
    from executorch.runtime import Runtime
    import torch

    RUNTIME = "ExecuTorch (executorch.runtime)"
except ImportError:
    from executorch_numpy_runtime import Runtime

    torch = None
    RUNTIME = "ExecuTorch (executorch_numpy_runtime)"


def open_model(path):
    """The .pte's forward method, its XNNPACK delegate applied, as edgekit ran it."""
    if torch is None:
        method = Runtime.get().load_program(str(path)).load_method("forward")
        return lambda tensor: np.asarray(method([np.ascontiguousarray(tensor)])[0])
    method = Runtime.get().load_program(Path(path)).load_method("forward")

    def run(tensor):
        staged = torch.from_numpy(np.ascontiguousarray(tensor))
        return method.execute([staged])[0].numpy().copy()  # the output buffer is reused

    return run
'''


def golden_files(root: Path, spec: dict[str, Any], artifact: Path) -> dict[str, str]:
    """The runner and the BundledProgram, written into the bundle at ``root``."""
    runner = write_runner(root, RUNNER, runtime="ExecuTorch's runtime", loader=LOADER)
    (Path(root) / BUNDLED).write_bytes(bundled_program(Path(root), spec, Path(artifact)))
    return {
        "the stage-3 tensors through ExecuTorch's runtime against the expected outputs "
        f"(numpy and ExecuTorch only): `python {runner} [BUNDLE]`, PASS or FAIL": runner,
        f"ExecuTorch's BundledProgram: the .pte with every stage-3 input and its expected "
        f"output tensor for method {METHOD}, for ExecuTorch's own bundled-program check "
        "(BundledModule.verify_result_with_bundled_expected_output)": BUNDLED,
    }


def bundled_program(root: Path, spec: dict[str, Any], artifact: Path) -> bytes:
    """The .pte at ``artifact`` with one test case per image (its stage-3 tensor, and the raw
    output tensor as the .pte returns it), serialized by ExecuTorch's BundledProgram API; the
    program is read from the file (``pte_file_path``), not re-exported."""
    import torch
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    raw = np.load(root / "expected" / "raw.npy", allow_pickle=False)
    shape = spec["artifact"]["output"]["shape"]
    cases = [
        MethodTestCase(
            inputs=[torch.from_numpy(np.load(root / image["stage3"], allow_pickle=False))],
            expected_outputs=[torch.from_numpy(np.ascontiguousarray(raw[index].reshape(shape)))],
        )
        for index, image in enumerate(spec["images"])
    ]
    program = BundledProgram(None, [MethodTestSuite(METHOD, cases)], pte_file_path=str(artifact))
    return serialize_from_bundled_program_to_flatbuffer(program)
