"""Runs one artifact inside the emulated aarch64 CPython (arm64-emu), where only numpy,
ai-edge-litert and onnxruntime exist: no torch, no edgekit. It is a file, not an import, there.

It stages inputs exactly as the host sessions do (``targets/tflite.py`` ``_Boundary`` and
``targets/onnx.py`` ``OnnxSession``): NCHW float32 -> the manifest's input layout, int8
quantization with the manifest's scale and zero point, dequantized float32 logits; onnxruntime
with the same session options. The host can run this file too (``emulated=False``): the tests
check it gives exactly the host sessions' outputs, so staging cannot drift unnoticed.

    python3.11 arm64_runner.py REQUEST.json   (writes the JSON result to request["result"])
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from typing import Any

import numpy as np


class TfliteRunner:
    def __init__(self, request: dict[str, Any]) -> None:
        from ai_edge_litert import interpreter as litert

        resolver = (
            litert.OpResolverType.AUTO
            if request["xnnpack"]
            else litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        self._interpreter = litert.Interpreter(
            model_path=request["artifact"],
            num_threads=request["threads"],
            experimental_op_resolver_type=resolver,
        )
        self._interpreter.allocate_tensors()  # the default delegate (XNNPACK) is applied here
        self._input = self._interpreter.get_input_details()[0]
        self._output = self._interpreter.get_output_details()[0]
        self._spec = request["input_spec"]
        self._out_spec = request["output_spec"]
        self._dtype = np.dtype(self._spec["dtype"])
        if self._dtype != np.dtype(self._input["dtype"]) or list(self._spec["shape"]) != [
            int(v) for v in self._input["shape"]
        ]:
            raise ValueError(
                f"manifest input {self._spec['dtype']}{self._spec['shape']} does not match the "
                f"file's {np.dtype(self._input['dtype']).name}{list(self._input['shape'])}"
            )
        ops = self._interpreter._get_ops_details()
        partitions = sum(op["op_name"] == "DELEGATE" for op in ops)
        self.info = {
            "runtime": f"LiteRT Interpreter (ai-edge-litert {_version('ai-edge-litert')})",
            "delegate": "XNNPACK" if request["xnnpack"] else None,
            "delegate_applied": partitions > 0,
            "kernels": "XNNPACK + builtin" if partitions else "builtin",
            "threads": request["threads"],
            "input_dtype": self._dtype.name,
        }

    def stage(self, sample: np.ndarray) -> np.ndarray:
        x = np.asarray(sample, dtype=np.float32)
        if self._spec.get("layout", "NHWC") == "NHWC":
            x = x.transpose(0, 2, 3, 1)
        quant = self._spec.get("quantization")
        if quant is not None:
            info = np.iinfo(self._dtype)
            x = np.clip(np.round(x / quant["scale"] + quant["zero_point"]), info.min, info.max)
        return np.ascontiguousarray(x, dtype=self._dtype)

    def invoke(self, staged: np.ndarray) -> np.ndarray:
        self._interpreter.set_tensor(self._input["index"], staged)
        self._interpreter.invoke()
        return self._interpreter.get_tensor(self._output["index"])

    def output(self, raw: np.ndarray) -> np.ndarray:
        quant = self._out_spec.get("quantization")
        values = np.asarray(raw)
        if quant is not None:
            values = (values.astype(np.float32) - quant["zero_point"]) * quant["scale"]
        return values.reshape(1, -1).astype(np.float32)


class OnnxRunner:
    def __init__(self, request: dict[str, Any]) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = request["threads"]
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(
            request["artifact"], options, providers=["CPUExecutionProvider"]
        )
        self._input_name = request["input_spec"].get("name") or self._session.get_inputs()[0].name
        self._output_names = [self._session.get_outputs()[0].name]
        self.info = {
            "runtime": f"onnxruntime {ort.__version__}",
            "providers": self._session.get_providers(),
            "kernels": "MLAS (CPUExecutionProvider)",
            "threads": request["threads"],
        }

    def stage(self, sample: np.ndarray) -> dict[str, np.ndarray]:
        return {self._input_name: np.ascontiguousarray(sample, dtype=np.float32)}

    def invoke(self, staged: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self._session.run(self._output_names, staged)

    def output(self, raw: list[np.ndarray]) -> np.ndarray:
        return np.asarray(raw[0], dtype=np.float32)


class PteRunner:
    """ExecuTorch .pte through executorch-numpy-runtime (ExecuTorch's C++ core with XNNPACK,
    torch-free), staged as ``targets/executorch.py`` stages: NCHW in the manifest's dtype."""

    def __init__(self, request: dict[str, Any]) -> None:
        import executorch_numpy_runtime as etnr

        program = etnr.Runtime.get().load_program(request["artifact"])
        self._method = program.load_method("forward")
        self._dtype = np.dtype(request["input_spec"].get("dtype", "float32"))
        info = etnr.runtime_info()
        self.info = {
            "runtime": (
                f"executorch-numpy-runtime {_version('executorch-numpy-runtime')} "
                f"(ExecuTorch {info['executorch_version']} runtime)"
            ),
            "backends": list(info["backends"]),
            "kernels": "XNNPACK + portable",
            "threads": request["threads"],
        }

    def stage(self, sample: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(sample, dtype=self._dtype)

    def invoke(self, staged: np.ndarray) -> Any:
        return self._method([staged])[0]

    def output(self, raw: Any) -> np.ndarray:
        return np.asarray(raw, dtype=np.float32).copy()


RUNNERS = {"tflite": TfliteRunner, "onnx": OnnxRunner, "pte": PteRunner}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _cpu() -> dict[str, str]:
    """What the (emulated) /proc/cpuinfo says: QEMU >= 10 synthesises it from QEMU_CPU (the
    part number is the core's MIDR part: 0xd0b Cortex-A76, 0xd03 A53, 0xd0c Neoverse N1...)."""
    facts = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("CPU part", "Features", "model name") and key not in facts:
                    facts[key] = value.strip()
    except OSError:
        pass
    return {"cpu_part": facts.get("CPU part", "?"), "cpu_features": facts.get("Features", "?")}


def predict(runner: Any, request: dict[str, Any]) -> dict[str, Any]:
    x = np.load(request["input"])
    outputs = np.concatenate(
        [runner.output(runner.invoke(runner.stage(x[i : i + 1]))) for i in range(len(x))]
    )
    np.save(request["output"], outputs)
    return {"shape": list(outputs.shape)}


def bench(runner: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The latency protocol of edgekit.worker.timed_loop (warm-up, then count and time)."""
    protocol = request["protocol"]
    if request.get("input"):
        sample = np.load(request["input"])
    else:
        shape = request["input_shape"]
        sample = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    staged = runner.stage(sample)
    begin = time.perf_counter()
    runner.invoke(staged)
    first_ms = (time.perf_counter() - begin) * 1e3
    for _ in range(protocol["warmup"]):
        runner.invoke(staged)
    samples: list[float] = []
    started = time.perf_counter()
    while True:
        begin_ns = time.perf_counter_ns()
        runner.invoke(staged)
        samples.append((time.perf_counter_ns() - begin_ns) / 1e6)
        elapsed = time.perf_counter() - started
        enough = len(samples) >= protocol["min_runs"] and elapsed >= protocol["min_seconds"]
        if enough or elapsed >= protocol["max_seconds"] or len(samples) >= protocol["max_runs"]:
            break
    return {"samples_ms": samples, "first_ms": first_ms, "loop_seconds": elapsed}


def main() -> None:
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    if request.get("crash_for_test") == "segfault":  # lets the tests prove isolation
        import ctypes

        ctypes.string_at(0)
    try:
        started = time.perf_counter()
        runner = RUNNERS[request["kind"]](request)
        load_ms = (time.perf_counter() - started) * 1e3
        result = {"predict": predict, "bench": bench}[request["mode"]](runner, request)
        result.update(status="ok", load_ms=load_ms)
        result["runtime"] = dict(
            runner.info,
            machine=platform.machine(),
            **_cpu(),
            python=sys.version.split()[0],
            numpy=np.__version__,
        )
    except Exception as exc:  # a failed row with the reason, not a traceback
        message = str(exc).splitlines()[0] if str(exc) else ""
        result = {"status": "failed", "error": f"{type(exc).__name__}: {message}"}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    tmp = request["result"] + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(result, handle)
    os.replace(tmp, request["result"])


if __name__ == "__main__":
    main()
