"""ONNX target: torch.onnx (dynamo) export (``convert``), onnxruntime quantization (``quantize``),
onnxruntime sessions (``session``), what runs on the fast path (``coverage``), onnxruntime's own
per-layer error (``layer_errors``) and the phone's onnxruntime_perf_test (``android``)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgekit.common.fileio import temporary_directory
from edgekit.targets import register
from edgekit.targets.base import (
    Accelerator,
    ExportInfo,
    ExportRequest,
    PlannedMemory,
    Target,
    TensorSpec,
)
from edgekit.targets.onnx.knobs import KNOBS

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel


@register
class OnnxTarget(Target):
    name = "onnx"
    runtime = "onnxruntime"
    frameworks = ("torch", "onnx")  # an .onnx source keeps its own graph
    accelerators = (Accelerator.CPU, Accelerator.GPU)
    packages = ("torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu")
    export_modules = ("onnxscript", "onnxruntime.quantization")
    run_modules = ("onnxruntime",)
    session_module = "edgekit.targets.onnx.session"
    peak_module = "edgekit.targets.onnx.peak"
    guest_modules = ("onnxruntime",)
    roles = frozenset(
        {
            "convert_block",
            "census",
            "coverage",
            "describe",
            "golden_files",
            "layer_errors",
            "official_runner",
            "profile",
        }
    )
    upstream: ClassVar[dict[str, str]] = {
        "quantize": "microsoft/onnxruntime",
        "convert": "pytorch/pytorch",
        "load": "microsoft/onnxruntime",
    }
    session_options = ("provider", *(knob.name for knob in KNOBS))  # provider: cuda or tensorrt
    tuning_knobs = KNOBS

    def export(self, request: ExportRequest) -> ExportInfo:
        from edgekit.targets.onnx import quantize
        from edgekit.targets.onnx.convert import (
            INPUT_NAME,
            OUTPUT_NAME,
            check_model,
            export_fp32,
            optimise_onnx_source,
        )

        source = request.source
        own_graph = source.framework == "onnx"
        details: dict[str, Any] = {"recipe": request.recipe}
        warn: list[str] = []
        if request.keep_float and source.framework == "torch":
            from edgekit.targets.layermap import require_modules

            require_modules("onnx", source.module, source.name, request.keep_float)
        with temporary_directory(".onnx-", request.output.parent) as work:
            fp32 = work / "fp32.onnx"
            if own_graph:
                details.update(optimise_onnx_source(source, fp32))
            else:
                details.update(export_fp32(source, fp32))
            input_name = self.describe(fp32).inputs[0].name if own_graph else INPUT_NAME
            if details.get("fallback_reason"):
                warn.append(
                    f"dynamo exporter failed, used the legacy exporter: "
                    f"{details['fallback_reason']}"
                )
                warn += [f"legacy exporter: {line}" for line in details["tracer_warnings"]]
            final = work / "final.onnx"
            if request.recipe == "fp32":
                final = fp32
            elif request.recipe == "int8":
                layout = source.preprocess.layout
                details.update(
                    quantize.quantize_static_qdq(
                        fp32, final, request, work, warn=warn, input_name=input_name, layout=layout
                    )
                )
            elif request.recipe == "int8-dynamic":
                details.update(quantize.quantize_dynamic(fp32, final, request, work, warn))
            else:
                details.update(quantize.convert_fp16(fp32, final, request))
                warn.append(quantize.FP16_WARNING)
            check_model(final)
            facts = self.describe(final)
            shutil.move(str(final), str(request.output))
        if own_graph:
            return ExportInfo(
                input=replace(facts.inputs[0], layout=source.preprocess.layout),
                output=replace(facts.outputs[0], layout="NC"),
                details=details,
                warnings=warn,
            )
        batch, channels, height, width = source.preprocess.input_shape(1)
        return ExportInfo(
            input=TensorSpec(INPUT_NAME, [batch, channels, height, width], "float32", "NCHW"),
            output=TensorSpec(OUTPUT_NAME, [1, source.preprocess.num_classes], "float32", "NC"),
            details=details,
            warnings=warn,
        )

    def runtime_code(self, file: str, options: dict[str, Any]) -> list[str]:
        level, mode = options["graph_optimization_level"], options["execution_mode"]
        lines = [
            "import onnxruntime as ort",
            "options = ort.SessionOptions()",
            f"options.intra_op_num_threads = {options['threads']}",
            f"options.graph_optimization_level = ort.GraphOptimizationLevel.{level}",
            f"options.execution_mode = ort.ExecutionMode.{mode}",
            f"options.inter_op_num_threads = {options['inter_op_threads']}",
            f"options.enable_mem_pattern = {options['enable_mem_pattern']}",
            f"options.enable_cpu_mem_arena = {options['enable_cpu_mem_arena']}",
        ]
        if not options["allow_spinning"]:
            lines.append('options.add_session_config_entry("session.intra_op.allow_spinning", "0")')
        return [
            *lines,
            f'session = ort.InferenceSession("{file}", options, '
            'providers=["CPUExecutionProvider"])',
        ]

    loads_source = True

    def load_source(
        self, path: Path, described: dict[str, Any], load_options: dict[str, Any]
    ) -> SourceModel:
        from edgekit.targets.onnx.source import load_source

        return load_source(Path(path), described, load_options)

    def convert_source(self, source: SourceModel, target: str) -> SourceModel:
        from edgekit.targets.onnx.source import as_torch

        return as_torch(source, target)

    def planned_memory(self, path: Path, details: dict[str, Any] | None = None) -> PlannedMemory:
        return PlannedMemory(
            None,
            "onnxruntime 1.32's Python API does not report what its memory pattern plans",
        )
