"""What the official runners do when edgekit asks them for a golden bundle's outputs, done on
this machine with the real runtime (no phone runs here): the stand-in ``adb`` (stand_ins.py)
calls ``run`` for a runner command that carries an output-file flag. Each writes its outputs
the way its runner does (from the runners' source; the flags are cited in
targets/*/official_runner.py) and prints what the runner prints."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np


def on_phone(phone: Path, remote: str) -> Path:
    """Where the stand-in keeps a file pushed to ``remote``."""
    return phone / remote.lstrip("/")


def run(words: list[str], phone: Path) -> int:
    """One runner command (its words); its exit status."""
    flags = dict(word[2:].split("=", 1) for word in words[1:] if word.startswith("--"))
    if "output_filepath" in flags:
        return benchmark_model(flags, phone)
    return executor_runner(flags, phone)


def benchmark_model(flags: dict[str, str], phone: Path) -> int:
    """LiteRT's benchmark_model: ``--input_layer_value_files=NAME:FILE`` (raw bytes, exactly
    the tensor's size or a fatal error), every output's raw bytes one after the other into
    ``--output_filepath``, then its usual timings."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(on_phone(phone, flags["graph"])), num_threads=1)
    interpreter.allocate_tensors()
    given = interpreter.get_input_details()[0]
    _, _, remote = flags["input_layer_value_files"].partition(":")
    data = on_phone(phone, remote).read_bytes()
    size = int(np.prod(given["shape"])) * np.dtype(given["dtype"]).itemsize
    if len(data) != size:
        print(f"The size of {remote} is {len(data)} bytes. It should be {size} bytes.")
        return 1
    interpreter.set_tensor(
        given["index"], np.frombuffer(data, given["dtype"]).reshape(given["shape"])
    )
    interpreter.invoke()
    with open(on_phone(phone, flags["output_filepath"]), "wb") as out:
        for detail in interpreter.get_output_details():
            out.write(interpreter.get_tensor(detail["index"]).tobytes())
    print(Path(os.environ["ADB_RUNNER_OUTPUT"]).read_text())
    return 0


def executor_runner(flags: dict[str, str], phone: Path) -> int:
    """ExecuTorch's executor_runner: each ``--inputs`` file read whole as an input's bytes,
    output i's raw bytes into ``<--output_file>-<i>.bin``."""
    import torch
    from executorch.runtime import Runtime

    from edgekit.targets.executorch.describe import SCALAR_TYPES

    program = Runtime.get().load_program(on_phone(phone, flags["model_path"]))
    method = program.load_method("forward")
    meta = method.metadata.input_tensor_meta(0)
    data = on_phone(phone, flags["inputs"]).read_bytes()
    if len(data) != meta.nbytes():
        print("Could not prepare inputs: 0x12", file=sys.stderr)  # Error::InvalidArgument
        return 1
    dtype = np.dtype(SCALAR_TYPES[int(meta.dtype())])
    tensor = np.frombuffer(data, dtype).reshape(list(meta.sizes())).copy()
    outputs = method.execute([torch.from_numpy(tensor)])
    print("Model executed successfully 1 time(s) in 0.5 ms.")
    print(f"{len(outputs)} outputs: ")
    for index, output in enumerate(outputs):
        path = on_phone(phone, f"{flags['output_file']}-{index}.bin")
        print(f"Writing output to file: {path}")
        path.write_bytes(output.numpy().tobytes())
    return 0
