"""TFLite / LiteRT: litert-torch (torch) or tf.lite (Keras) conversion, ai-edge-quantizer, and
the LiteRT runtime (litert-torch 0.10.0, ai-edge-quantizer 0.10.0, tensorflow 2.21).

``convert_torch`` and ``convert_keras`` say how each recipe is made, ``session`` how the file
runs (Interpreter + XNNPACK on the CPU, CompiledModel on the GPU), ``coverage`` what runs on the
fast path, ``keep_float`` the float islands, ``layer_errors`` LiteRT's own per-layer error and
``android`` the phone's benchmark_model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgekit.common.fileio import raise_disk_error, temporary_directory
from edgekit.common.quiet import quiet_native, quiet_python
from edgekit.errors import UnsupportedExport, UserInputError, first_line
from edgekit.targets import register
from edgekit.targets.base import (
    Accelerator,
    ExportInfo,
    ExportRequest,
    PlannedMemory,
    Target,
)
from edgekit.targets.knobs import Knob

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel

QUIET = {
    "env": {"LITERT_TORCH_SHOW_PROGRESS": "n"},
    "messages": (
        ".*LeafSpec.*",
        ".*torch.ao.quantization.*",
        ".*experimental_preserve_all_tensors.*",  # ai-edge-quantizer keeps every tensor
    ),
    "stdout": True,
}


@register
class TFLiteTarget(Target):
    """TFLite / LiteRT: litert-torch (torch) or tf.lite (Keras), run by the LiteRT runtime."""

    name = "tflite"
    export_cost = 2.0  # litert-torch conversion, several times onnx's
    runtime = "LiteRT"
    frameworks = ("torch", "keras")
    io_dtypes = ("float32", "int8")
    accelerators = (Accelerator.CPU, Accelerator.GPU)
    session_options = ("xnnpack", "api")
    # the Interpreter's default XNNPACK delegate against LiteRT's builtin kernels; the Python
    # Interpreter of ai-edge-litert 2.3.0 takes no XNNPACK flags (fp16, weight cache)
    tuning_knobs = (
        Knob("xnnpack", (True, False), "XNNPACK delegate or the builtin kernels"),
        Knob(
            "api",
            ("interpreter", "compiled_model"),
            "the Interpreter or CompiledModel (CPU)",
            requires={"xnnpack": True},
        ),
    )
    packages = (
        "ai-edge-litert",
        "litert-torch",
        "litert-converter",
        "ai-edge-quantizer",
        "tensorflow-cpu",
        "tensorflow",
        "keras",
        "tflite-runtime",
    )
    export_modules = ("litert_torch", "ai_edge_quantizer")
    run_modules = ("ai_edge_litert.interpreter",)
    session_module = "edgekit.targets.tflite.session"
    peak_module = "edgekit.targets.tflite.peak"
    guest_modules = ("ai_edge_litert",)
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
        "quantize": "google-ai-edge/litert-torch",
        "convert": "google-ai-edge/litert-torch",
        "load": "google-ai-edge/LiteRT",
    }

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        reason = super().unsupported_reason(recipe, source, io_dtype)
        if reason is None and io_dtype == "int8" and recipe != "int8":
            return (
                f"tflite {recipe}: int8 input/output needs the int8 (static) recipe; {recipe} "
                "keeps float32 tensors at the model boundary"
            )
        return reason

    def export(self, request: ExportRequest) -> ExportInfo:
        from edgekit.targets.tflite.flatbuffer import graph_ops
        from edgekit.targets.tflite.session import make_interpreter, tensor_specs

        torch_source = request.source.framework == "torch"
        if request.recipe == "int8" and request.calibration is None:
            raise UserInputError("tflite int8: static quantization needs calibration data")
        if request.keep_float and request.recipe == "int8" and not torch_source:
            raise UnsupportedExport(
                f"tflite int8: keeping {', '.join(request.keep_float)} in float needs a torch "
                "source (layers are named by torch module path); tf.lite re-quantizes a float op "
                "left between dequantize and quantize"
            )
        if request.keep_float and request.recipe != "int8":
            raise UnsupportedExport(
                f"tflite {request.recipe}: keep_float applies to the int8 recipe only"
            )
        if request.keep_float:
            from edgekit.targets.layermap import require_modules

            require_modules(
                "tflite int8", request.source.module, request.source.name, request.keep_float
            )
        output = Path(request.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        with temporary_directory(".tflite-", output.parent) as scratch:
            converted = self._convert(request, scratch, torch_source=torch_source)
            os.replace(converted.file, output)
        inputs, outputs = tensor_specs(make_interpreter(output, xnnpack=False), converted.layout)
        ops = graph_ops(output)
        converted.details["transposes"] = sum(op.name == "TRANSPOSE" for op in ops)
        converted.details["ops"] = len(ops)
        return ExportInfo(inputs[0], outputs[0], converted.details, converted.warnings)

    def _convert(self, request: ExportRequest, scratch: Path, *, torch_source: bool) -> Any:
        if torch_source:
            from edgekit.targets.tflite.convert_torch import TorchConverter as Converter
        else:
            from edgekit.targets.tflite.convert_keras import KerasConverter as Converter
        try:
            with quiet_python(**QUIET), quiet_native():
                return Converter(request, scratch).run()
        except (UnsupportedExport, UserInputError):
            raise
        except Exception as exc:
            raise_disk_error(exc, scratch)
            converter = "litert-torch" if torch_source else "tf.lite"
            raise UnsupportedExport(
                f"tflite {request.recipe}: {converter} could not convert "
                f"{request.source.name}: {type(exc).__name__}: {first_line(exc, 300)}"
            ) from exc

    def runtime_code(self, file: str, options: dict[str, Any]) -> list[str]:
        if options.get("api") == "compiled_model" and options["xnnpack"]:
            return [
                "from ai_edge_litert.compiled_model import CompiledModel",
                "from ai_edge_litert.cpu_options import CpuOptions",
                "from ai_edge_litert.hardware_accelerator import HardwareAccelerator",
                "from ai_edge_litert.options import Options",
                "model = CompiledModel.from_file(",
                f'    "{file}", options=Options(hardware_accelerators=HardwareAccelerator.CPU,',
                f"    cpu_options=CpuOptions(num_threads={options['threads']})))",
                "// Android (Kotlin): CompiledModel.create(context.assets, "
                f'"{file}", CompiledModel.Options(Accelerator.CPU), env)',
            ]
        resolver = "AUTO" if options["xnnpack"] else "BUILTIN_WITHOUT_DEFAULT_DELEGATES"
        return [
            "from ai_edge_litert.interpreter import Interpreter, OpResolverType",
            f'interpreter = Interpreter(model_path="{file}", num_threads={options["threads"]},',
            f"                          experimental_op_resolver_type=OpResolverType.{resolver})",
            "interpreter.allocate_tensors()",
            f"// Android: new Interpreter(model, new Interpreter.Options()"
            f".setNumThreads({options['threads']}).setUseXNNPACK({str(options['xnnpack']).lower()}))",
        ]

    def planned_memory(self, path: Path, details: dict[str, Any] | None = None) -> PlannedMemory:
        return PlannedMemory(
            None, "LiteRT 2.3.0's Python Interpreter does not report its arena's size"
        )

    def check(self) -> dict[str, Any]:
        facts = super().check()
        if not facts["run"]:
            from edgekit.targets.base import importable

            if importable("tflite_runtime.interpreter") is None:  # the accepted fallback
                facts["run"] = True
                facts["problems"] = []
        facts["keras_export"] = _importable_tf()
        return facts


def _importable_tf() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None
