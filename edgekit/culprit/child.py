"""The culprit's worker: ``python -m edgekit.culprit.child REQUEST_JSON``, one process that loads
the model once and converts block after block, so that a crash or a hang takes only this
process down (the parent, ``edgekit.culprit.worker``, restarts it).

It answers on the file descriptor the request names, one JSON line per message: ``ready``
(the blocks of the model) once, then for each request a ``stage`` line as each step starts and
one ``outcome``. Requests arrive on stdin: ``{"attempt": PATH}`` or ``{"repro": PATH, "folder":
DIR}``."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


class Worker:
    def __init__(self, request: dict[str, Any], answer: Any) -> None:
        from edgekit.culprit.record import block_calls
        from edgekit.export.pipeline import VALIDATION_SAMPLES
        from edgekit.quantize.calibration import DEFAULT_SAMPLES, sample_calibration
        from edgekit.quantize.recipes import get_recipe
        from edgekit.sources.data import load_dataset
        from edgekit.sources.load import reload_model
        from edgekit.targets import get_target

        self.answer = answer
        self.recipe = request["recipe"]
        tolerance = get_recipe(self.recipe).tolerance
        self.min_sqnr_db, self.min_agreement = tolerance.min_sqnr_db, tolerance.min_agreement
        plugin = get_target(request["target"])
        self.convert_block = plugin.role_function("convert_block")
        # the converter's and runtime's imports before "ready": an attempt's deadline then
        # times the conversion, not the first import
        for name in (*plugin.export_modules, *plugin.run_modules):
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        source = reload_model(request["source"])
        self.model = source.module.eval()
        dataset = load_dataset(request["data"], source.preprocess)
        self.checks = dataset.evaluation.x[: request["checks"]]
        self.calibration = dataset.calibration.x[: request["calibration"]]
        # the whole model is judged as export judges it: on export's validation images and
        # calibrated on export's draw, so a refusal of export's is reproduced, not missed
        self.whole_checks = dataset.evaluation.x[:VALIDATION_SAMPLES]
        self.whole_calibration = sample_calibration(dataset, DEFAULT_SAMPLES).x
        self.calls = block_calls(self.model, self.checks[:1])
        self.say({"ready": [call.to_dict() for call in self.calls.values()]})

    def say(self, message: dict[str, Any]) -> None:
        self.answer.write(json.dumps(message) + "\n")
        self.answer.flush()

    def inputs(self, path: str) -> tuple[np.ndarray, np.ndarray | None]:
        from edgekit.culprit.record import block_inputs

        if path == "":
            checks, calibration = self.whole_checks, self.whole_calibration
        else:
            checks, calibration = self.checks, self.calibration
        checks = block_inputs(self.model, path, checks)
        if self.recipe != "int8":
            return checks, None
        return checks, block_inputs(self.model, path, calibration)

    def attempt(self, path: str) -> dict[str, Any]:
        import torch

        from edgekit.culprit.harness import judged, verdict_line
        from edgekit.culprit.outcome import STAGE_CLASS, Outcome, op_named
        from edgekit.culprit.record import bound_block
        from edgekit.errors import cause_line

        started = time.perf_counter()
        module = bound_block(self.model, self.calls[path])
        checks, calibration = self.inputs(path)
        with torch.no_grad():
            reference = np.stack([module(torch.from_numpy(x)).numpy() for x in checks])
        stage = ["export"]

        def enter(name: str) -> None:
            stage[0] = name
            self.say({"stage": name})

        scratch = Path(tempfile.mkdtemp(prefix="block-"))  # under the worker's TMPDIR
        try:
            run = self.convert_block(module, checks[0], self.recipe, calibration, scratch, enter)
            outputs = np.stack([run(x) for x in checks])
        except Exception as exc:
            outcome = Outcome(STAGE_CLASS[stage[0]], stage[0], cause_line(exc), op_named(exc))
        else:
            whole = self.min_agreement if path == "" else None
            verdict = judged(reference, outputs, self.min_sqnr_db, whole)
            failure = "mismatch" if verdict["mismatch"] else None
            message = verdict_line(verdict) if failure else ""
            outcome = Outcome(failure, "compare", message, verdict=verdict)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        outcome.seconds = round(time.perf_counter() - started, 2)
        return outcome.to_dict()

    def repro(self, path: str, folder: str) -> dict[str, Any]:
        import torch

        call = self.calls[path]
        checks, calibration = self.inputs(path)
        where = Path(folder)
        torch.save(self.model.get_submodule(path), where / "block.pt")
        (where / "call.json").write_text(json.dumps({"rest": call.rest, "kwargs": call.kwargs}))
        np.save(where / "inputs.npy", checks)
        if calibration is not None:
            np.save(where / "calibration.npy", calibration)
        return {"written": sorted(p.name for p in where.iterdir())}


def main() -> None:
    request = json.loads(sys.argv[1])
    from edgekit.common.quiet import quiet_user_code

    with os.fdopen(request["answer_fd"], "w") as answer:
        with quiet_user_code():
            worker = Worker(request, answer)
        for line in sys.stdin:
            asked = json.loads(line)
            if "attempt" in asked:
                worker.say({"outcome": worker.attempt(asked["attempt"])})
            elif "repro" in asked:
                worker.say({"outcome": worker.repro(asked["repro"], asked["folder"])})


if __name__ == "__main__":
    main()
