"""ExecuTorch target: a ``.pte`` program whose graph is lowered to the XNNPACK delegate
(``convert``), run with the ``executorch.runtime`` bindings whose pip build has XNNPACK compiled
in (``session``); ``coverage`` reads what runs where from the file itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from edgekit.targets import register
from edgekit.targets.base import (
    Accelerator,
    ExportInfo,
    ExportRequest,
    Target,
    TensorSpec,
)
from edgekit.targets.manifest import Manifest


@register
class ExecuTorchTarget(Target):
    name = "executorch"
    export_cost = 3.0  # measured: torch.export + PT2E/lowering dominate
    runtime = "ExecuTorch (XNNPACK delegate)"
    accelerators = (Accelerator.CPU, Accelerator.GPU)  # GPU: refused with the runtime's reason
    packages = ("executorch", "torch", "torchao")
    export_modules = ("executorch.exir",)
    run_modules = ("executorch.runtime",)
    session_module = "edgekit.targets.executorch.session"
    peak_module = "edgekit.targets.executorch.peak"
    guest_modules = ("executorch_numpy_runtime",)
    roles = frozenset(
        {
            "convert_block",
            "census",
            "coverage",
            "describe",
            "golden_files",
            "layer_errors",
            "logged_cause",
            "official_runner",
            "planned_memory",
            "profile",
        }
    )
    upstream: ClassVar[dict[str, str]] = {
        "quantize": "pytorch/executorch",
        "convert": "pytorch/executorch",
        "load": "pytorch/executorch",
    }
    role_modules: ClassVar[dict[str, str]] = {
        "planned_memory": "memory",
        "logged_cause": "session",
    }

    def export(self, request: ExportRequest) -> ExportInfo:
        import torch

        from edgekit.targets.executorch.convert import (
            export_warnings,
            lower,
            prepare_module,
            quiet_library_noise,
            verify_kept_float,
        )

        quiet_library_noise()
        source = request.source
        example = source.example_input()
        module, details = prepare_module(request, example)
        buffer, graph_stats = lower(module, torch.from_numpy(example), request.recipe)
        verify_kept_float(request.keep_float, graph_stats)
        request.output.write_bytes(buffer)
        details.update(graph_stats)
        channels, (height, width) = source.preprocess.channels, source.preprocess.input_size
        classes = len(source.preprocess.class_names)
        return ExportInfo(
            input=TensorSpec("input", [1, channels, height, width], "float32", "NCHW"),
            output=TensorSpec("logits", [1, classes], "float32", "NC"),
            details=details,
            warnings=export_warnings(request.recipe, details),
        )

    def open(
        self,
        path: Path,
        manifest: Manifest,
        accelerator: Accelerator = Accelerator.CPU,
        threads: int = 1,
        **options: Any,
    ) -> Any:
        from edgekit.targets.executorch.convert import quiet_library_noise

        quiet_library_noise()
        return super().open(path, manifest, accelerator, threads, **options)

    def runtime_code(self, file: str, options: dict[str, Any]) -> list[str]:
        threads = options["threads"]
        return [
            "from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool",
            f"_unsafe_reset_threadpool({threads})",
            "from executorch.runtime import Runtime",
            f'method = Runtime.get().load_program("{file}").load_method("forward")',
            f"// C++: executorch::extension::threadpool::get_threadpool()"
            f"->_unsafe_reset_threadpool({threads});",
        ]

    def check(self) -> dict[str, Any]:
        facts = super().check()
        try:
            from edgekit.targets.executorch.session import runtime

            registry = runtime().Runtime.get().backend_registry
            facts["backends"] = list(registry.registered_backend_names)
            facts["xnnpack"] = bool(registry.is_available("XnnpackBackend"))
        except Exception as exc:
            facts["xnnpack"] = False
            facts["problems"].append(f"{type(exc).__name__}: {str(exc)[:120]}")
        return facts
