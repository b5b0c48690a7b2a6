"""ExecuTorch target: a ``.pte`` program whose graph is lowered to the XNNPACK delegate
(``convert``), run with the ``executorch.runtime`` bindings whose pip build has XNNPACK compiled
in (``session``); ``coverage`` reads what runs where from the file itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.targets import register
from edgekit.targets.base import (
    Accelerator,
    Census,
    Coverage,
    ExportInfo,
    ExportRequest,
    FileFacts,
    LayerErrors,
    OfficialRunner,
    OpTimes,
    PlannedMemory,
    Target,
    TensorSpec,
)
from edgekit.targets.manifest import Manifest

if TYPE_CHECKING:
    import numpy as np

    from edgekit.sources.source import SourceModel


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

    def coverage(self, path: Path, manifest: Manifest) -> Coverage:
        from edgekit.targets.executorch.convert import quiet_library_noise
        from edgekit.targets.executorch.coverage import coverage

        quiet_library_noise()
        return coverage(Path(path), manifest)

    def layer_errors(
        self, source: SourceModel, x: np.ndarray, names: list[str], work: Path
    ) -> LayerErrors:
        from edgekit.targets.executorch.layer_errors import layer_errors

        return layer_errors(source, x, names, work)

    def describe(self, path: Path) -> FileFacts:
        from edgekit.targets.executorch.describe import describe

        return describe(Path(path))

    def planned_memory(self, path: Path, details: dict[str, Any] | None = None) -> PlannedMemory:
        from edgekit.targets.executorch.memory import planned_memory

        return planned_memory(Path(path), details)

    def census(self, path: Path, manifest: Manifest | None = None) -> Census:
        from edgekit.targets.executorch.census import census

        return census(Path(path), manifest)

    def profile(
        self, path: Path, manifest: Manifest, threads: int, runs: int, warmup: int
    ) -> OpTimes:
        from edgekit.targets.executorch.profile import profile

        return profile(Path(path), manifest, threads, runs, warmup)

    def official_runner(self) -> OfficialRunner:
        from edgekit.targets.executorch.android import RUNNER

        return RUNNER

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
