"""onnx int8: which integer formats keep the model, and what each costs, on this CPU.

onnxruntime's x86 kernels for uint8 activations x int8 weights (U8S8) add pairs of products in
int16 (VPMADDUBSW) on a CPU without VNNI, which saturates with full-range weights. edgekit's
int8 recipe therefore gives every file 7-bit weights (``reduce_range``). This script quantizes
the same fp32 ONNX file of each model three ways, all QDQ, per-channel, MinMax on the same
calibration images:

- ``u8s8, 7-bit weights``: the recipe as it stands;
- ``u8s8, 8-bit weights``: the recipe without ``reduce_range``;
- ``u8u8, 8-bit weights``: uint8 weights, which onnxruntime's docs give as free of saturation.

For each it gives SQNR and top-1 agreement against the torch source on the evaluation images,
and the median latency of one image (onnxruntime, 1 thread), timed in the same rounds,
alternating, the order flipped each round. Writes benchmarks/ONNX_INT8_FORMATS.md and .json.

    .venv/bin/python benchmarks/onnx_int8_formats.py [--rounds 7]

Run it on a quiet machine: nothing else should run beside it."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import DATA, HERE, header, write_json, write_markdown

from edgekit.common.metrics import compare_outputs
from edgekit.export.pipeline import export_artifact
from edgekit.sources.data import load_dataset
from edgekit.sources.load import load_model
from edgekit.targets.onnx.biases import own_biases
from edgekit.targets.onnx.int8_options import static_options
from edgekit.targets.onnx.quantize import CalibrationReader, pre_process

# the built-in model, and the three architectures of the coverage sweep whose onnx int8 file
# was refused on an AVX2-only EPYC and passed on an AVX-512 VNNI one
MODELS = ("digits-mobilenet", "ijepa", "convnextv2", "pvt_v2")
FORMATS = {
    "u8s8, 7-bit weights": {},
    "u8s8, 8-bit weights": {"reduce_range": False},
    "u8u8, 8-bit weights": {"reduce_range": False, "weight_type": "QUInt8"},
}
RUNS = 20  # timed runs of one image per format and round
EVALUATED = 32


def source_and_data(model: str, work: Path) -> tuple:
    if model in DATA:
        source = load_model(model, quiet=True)
        return source, load_dataset(DATA[model], source.preprocess)
    from coverage import build

    facts = build(model, work / model)
    source = load_model(str(work / model), input_shape=tuple(facts["input"]), quiet=True)
    return source, load_dataset("synthetic:64", source.preprocess)


def quantized(fp32: Path, calibration: np.ndarray, work: Path) -> dict[str, Path]:
    """The fp32 file quantized in each format, as the recipe does otherwise."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_static

    pre, _ = pre_process(fp32, work, [])
    unshared = own_biases(pre, work)
    name = onnx.load(str(fp32), load_external_data=False).graph.input[0].name
    made = {}
    for label, changes in FORMATS.items():
        options = static_options()
        options.update(
            {k: getattr(QuantType, v) if k == "weight_type" else v for k, v in changes.items()}
        )
        out = work / f"{label.replace(', ', '-').replace(' ', '_')}.onnx"
        quantize_static(str(unshared), str(out), CalibrationReader(calibration, name), **options)
        made[label] = out
    return made


def session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def row(model: str, rounds: int, work: Path, log) -> dict:
    import torch

    work.mkdir(parents=True, exist_ok=True)
    source, dataset = source_and_data(model, work)
    fp32 = export_artifact(source, dataset, "onnx", "fp32", out_dir=work, calibration_samples=32)
    images = dataset.evaluation.x[:EVALUATED]
    with torch.no_grad():
        reference = np.concatenate(
            [source.module(torch.from_numpy(x[None])).numpy() for x in images]
        )
    files = quantized(fp32.artifact.path, dataset.calibration.x[:32], work)
    sessions = {label: session(path) for label, path in files.items()}
    name = next(iter(sessions.values())).get_inputs()[0].name
    judged = {}
    for label, run in sessions.items():
        got = np.concatenate([run.run(None, {name: x[None]})[0] for x in images])
        judged[label] = compare_outputs(reference, got)
    timed: dict[str, list[float]] = {label: [] for label in sessions}
    one = images[:1]
    for turn in range(rounds):
        order = list(sessions) if turn % 2 == 0 else list(reversed(sessions))
        for label in order:
            run = sessions[label]
            run.run(None, {name: one})  # warm
            started = time.perf_counter()
            for _ in range(RUNS):
                run.run(None, {name: one})
            timed[label].append((time.perf_counter() - started) / RUNS)
    current = statistics.median(timed["u8s8, 7-bit weights"])
    cells = {
        label: {
            "sqnr_db": judged[label]["sqnr_db"],
            "agreement": judged[label]["top1_agreement"],
            "median_ms": statistics.median(timed[label]) * 1e3,
            "round_ms": [t * 1e3 for t in timed[label]],
            "vs_recipe": statistics.median(timed[label]) / current,
        }
        for label in sessions
    }
    log(
        f"{model}: "
        + "; ".join(
            f"{k} {v['sqnr_db']:.1f} dB {v['agreement']:.3f} {v['median_ms']:.3f} ms"
            for k, v in cells.items()
        )
    )
    return {"model": model, "images": len(images), "cells": cells}


def page(record: dict) -> list[str]:
    lines = header(
        "onnx int8: the integer formats, side by side",
        "benchmarks/onnx_int8_formats.py",
        [
            f"- {record['rounds']} rounds of {RUNS} runs of one image per format, alternating; "
            "onnxruntime CPU, 1 thread; SQNR and top-1 agreement against the torch source on "
            f"{EVALUATED} evaluation images (synthetic for the transformers models)."
        ],
        facts=record["machine"],
        written=record["written"],
    )
    lines += [
        "| model | format | SQNR dB | top-1 agreement | median ms | vs the recipe |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for found in record["rows"]:
        for label, cell in found["cells"].items():
            lines.append(
                f"| {found['model']} | {label} | {cell['sqnr_db']:.1f} | "
                f"{cell['agreement']:.3f} | {cell['median_ms']:.3f} | "
                f"{cell['vs_recipe']:.2f}x |"
            )
    return lines


def main() -> None:
    from datetime import UTC, datetime

    from common import machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", help="comma-separated models")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else MODELS
    with tempfile.TemporaryDirectory(prefix="edgekit-onnx-formats-") as tmp:
        rows = [
            row(m, args.rounds, Path(tmp) / m, lambda line: print(line, file=sys.stderr))
            for m in chosen
        ]
    record = {
        "written": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": machine(),
        "rounds": args.rounds,
        "rows": rows,
    }
    write_json(HERE / "onnx_int8_formats.json", record)
    write_markdown(HERE / "ONNX_INT8_FORMATS.md", page(record))


if __name__ == "__main__":
    main()
