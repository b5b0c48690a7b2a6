"""What an ONNX golden bundle carries for onnxruntime's own checks: a plain-Python runner
(numpy and onnxruntime only; the emulated ARM64 guest runs it as it is), and the model with one
``test_data_set_K/`` per image in the layout onnxruntime's ``onnx_test_runner`` reads."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.targets.golden_runner import write_runner

RUNNER = "run_onnxruntime.py"
FOLDER = "onnx"

# the runner's runtime part: a CPU session on one thread, as edgekit's host session runs it
LOADER = '''
import onnxruntime as ort

RUNTIME = f"onnxruntime {ort.__version__}"


def open_model(path):
    """The .onnx on onnxruntime's CPU provider, one thread, as edgekit ran it."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    given = session.get_inputs()[0].name
    return lambda tensor: session.run(None, {given: tensor})[0]
'''


def golden_files(root: Path, spec: dict[str, Any], artifact: Path) -> dict[str, str]:
    """The runner and the onnxruntime test folder, written into the bundle at ``root``."""
    runner = write_runner(root, RUNNER, runtime="onnxruntime", loader=LOADER)
    folder = write_test_data(Path(root), spec, Path(artifact))
    return {
        "the stage-3 tensors through onnxruntime against the expected outputs (numpy and "
        f"onnxruntime only): `python {runner} [BUNDLE]`, PASS or FAIL": runner,
        "model.onnx and one test_data_set_K/ per image K (input_0.pb, output_0.pb: TensorProtos "
        "of the stage-3 tensor and of the raw output tensor, named as the model names them), "
        "the test-case layout onnxruntime's onnx_test_runner and ONNX's backend tests read": folder,
    }


def write_test_data(root: Path, spec: dict[str, Any], artifact: Path) -> str:
    """``onnx/model.onnx`` and ``onnx/test_data_set_K/{input_0,output_0}.pb`` for image K,
    named with the model's own input and output names; returns the folder's path."""
    import onnx
    from onnx import numpy_helper

    folder = root / FOLDER
    folder.mkdir()
    shutil.copyfile(artifact, folder / "model.onnx")
    graph = onnx.load(str(artifact), load_external_data=False).graph
    weights = {tensor.name for tensor in graph.initializer}  # old IRs list them as inputs too
    input_name = next(value.name for value in graph.input if value.name not in weights)
    output_name = graph.output[0].name
    raw = np.load(root / "expected" / "raw.npy", allow_pickle=False)
    shape = spec["artifact"]["output"]["shape"]
    for index, image in enumerate(spec["images"]):
        case = folder / f"test_data_set_{index}"
        case.mkdir()
        tensor = np.load(root / image["stage3"], allow_pickle=False)
        returned = raw[index].reshape(shape)  # the output tensor as the model returns it
        for file, array, name in (
            ("input_0.pb", tensor, input_name),
            ("output_0.pb", returned, output_name),
        ):
            proto = numpy_helper.from_array(np.ascontiguousarray(array), name)
            (case / file).write_bytes(proto.SerializeToString())
    return f"{FOLDER}/"
