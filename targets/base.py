"""The target protocol: how a source model becomes an artifact, and how an artifact is opened.

A target is a package ``targets/<name>/`` whose ``__init__`` defines one ``Target``
subclass (capabilities as class attributes, heavy imports deferred) and registers it; the registry
line in ``targets/__init__.py`` is the only other place that names it.

Its roles (``ROLES``: census, coverage, profile, ...) are found by convention, as ``open()``
finds the session module: the role ``census`` is the function ``census`` of the package's module
``census`` (``edgekit.targets.tflite.census.census``), imported when first called. A target
declares the roles it fills in ``roles``, and names another module for one in
``role_modules``; a plugin may also override the method itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from edgekit.records import Coverage
from edgekit.sources.source import SourceModel
from edgekit.targets import add_target, register
from edgekit.targets.census import Census
from edgekit.targets.knobs import Knob
from edgekit.targets.layermap import LayerErrors
from edgekit.targets.manifest import Manifest
from edgekit.targets.profiling import OpTimes
from edgekit.targets.session import Accelerator, Session, TensorSpec

# a target plugin imports this one module: the base class, what it is handed and returns, the
# session contract, and the registry's two calls (tests/plugins/torchscript_target.py)
__all__ = [
    "Accelerator",
    "Census",
    "Coverage",
    "ExportInfo",
    "ExportRequest",
    "FileFacts",
    "LayerErrors",
    "Manifest",
    "OfficialRunner",
    "OpTimes",
    "Session",
    "SourceModel",
    "Target",
    "TensorSpec",
    "add_target",
    "register",
]


@dataclass
class ExportRequest:
    source: SourceModel
    recipe: str  # fp32, fp16, int8, int8-dynamic
    output: Path  # write the artifact exactly here (a temporary name the caller renames)
    calibration: np.ndarray | None = None  # NCHW float32, for recipes that need it
    io_dtype: str = "float32"  # "int8": integer input and output (targets that declare it)
    keep_float: tuple[str, ...] = ()  # module paths to leave in float (quantize-debug)


@dataclass
class ExportInfo:
    """What a target reports about the file it wrote."""

    input: TensorSpec
    output: TensorSpec
    details: dict[str, Any] = field(default_factory=dict)  # exporter, opset, converter options
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedMemory:
    """Activation memory a runtime plans for a file (bytes), or None with why it is unknown."""

    bytes: int | None
    source: str  # where the figure comes from, or why there is none


@dataclass(frozen=True)
class OfficialRunner:
    """The target's own benchmark binary on a phone: where a user points edgekit at it, its
    command line and the parser of what it prints."""

    env_var: str
    command: Callable[[str, str, int, int, bool], list[str]]  # runner, model, threads, runs, gpu
    parse: Callable[[str], dict[str, float]]
    # golden checks: the command that runs the model once on one raw input file and writes its
    # outputs' raw bytes (runner, model, input file, output path, input tensor), and the file it
    # writes them to (from the output path); None where the runner cannot give outputs, and why
    golden_command: Callable[[str, str, str, str, TensorSpec], list[str]] | None = None
    golden_output: Callable[[str], str] | None = None
    no_golden: str = "it prints timings, not outputs"


# each role a target may fill, and what a target without it lacks (its refusal's words)
ROLES = {
    "census": "no op census for this format",
    "coverage": "no fast-path coverage reader for this format",
    "describe": "cannot read a file it did not make",
    "profile": "no per-op profiler for this format",
    "layer_errors": "no per-layer quantization debugger",
    "official_runner": "no official benchmark runner for phones",
    "planned_memory": "no planned-memory reader in this edgekit",
    "golden_files": "no runner or runtime test files for golden bundles",
    "convert_block": "no block-by-block conversion for edgekit culprit",
    "logged_cause": "no reader of what its runtime logs and leaves out of its errors",
}


class Target:
    """Subclass per export format; see the module docstring."""

    name: ClassVar[str] = ""  # its file suffix is in the registry table (targets/__init__.py)
    runtime: ClassVar[str] = ""  # the on-device runtime, for messages
    recipes: ClassVar[tuple[str, ...]] = ("fp32", "fp16", "int8", "int8-dynamic")
    frameworks: ClassVar[tuple[str, ...]] = ("torch",)
    io_dtypes: ClassVar[tuple[str, ...]] = ("float32",)
    accelerators: ClassVar[tuple[Accelerator, ...]] = (Accelerator.CPU,)
    # how long an export takes against the others' (a cluster starts the longest first)
    export_cost: ClassVar[float] = 1.0
    session_options: ClassVar[tuple[str, ...]] = ()  # options open() takes (tflite: xnnpack)
    # the runtime options edgekit tune searches beside the thread count (edgekit.targets.knobs)
    tuning_knobs: ClassVar[tuple[Knob, ...]] = ()
    packages: ClassVar[tuple[str, ...]] = ()  # distributions it exports and runs with
    export_modules: ClassVar[tuple[str, ...]] = ()  # doctor: these must import to export
    run_modules: ClassVar[tuple[str, ...]] = ()  # ... and these to run
    session_module: ClassVar[str] = ""  # numpy-only module with open_session (the guest runs it)
    guest_modules: ClassVar[tuple[str, ...]] = ()  # runtime modules that session needs
    # module whose kernels() gives its runtime's GEMM peak kernels (edgekit.measure.peak); "": none
    peak_module: ClassVar[str] = ""
    # the ROLES it fills, each by its package's module of the role's name ...
    roles: ClassVar[frozenset[str]] = frozenset()
    # ... or by the module named here (relative to the package: {"planned_memory": "memory"})
    role_modules: ClassVar[dict[str, str]] = {}
    # where a failure of each stage belongs upstream (quantize, convert, load), for culprit's
    # repro folders; torch.export's own failures belong to pytorch/pytorch whatever the target
    upstream: ClassVar[dict[str, str]] = {}

    def has_role(self, role: str) -> bool:
        """Does this target fill ``role``: declared, or a method of its own (a plugin's)."""
        return role in self.roles or getattr(type(self), role) is not getattr(Target, role)

    def role_function(self, role: str) -> Callable[..., Any]:
        """The function that fills a declared role; NotImplementedError for one it lacks."""
        import importlib

        if role not in self.roles:
            raise NotImplementedError(f"{self.name}: {ROLES[role]}")
        package = type(self).__module__
        module = importlib.import_module(f"{package}.{self.role_modules.get(role, role)}")
        return getattr(module, role)

    def unsupported_reason(
        self, recipe: str, source: SourceModel, io_dtype: str = "float32"
    ) -> str | None:
        """None when this target can export ``recipe`` for ``source``, else why not."""
        if recipe not in self.recipes:
            return f"{self.name}: unknown recipe '{recipe}' (have {', '.join(self.recipes)})"
        if source.framework not in self.frameworks:
            return (
                f"{self.name}/{recipe}: {source.name} is a {source.framework} model; "
                f"{self.name} exports {', '.join(self.frameworks)} models"
            )
        if io_dtype not in self.io_dtypes:
            return (
                f"{self.name}/{recipe}: io_dtype {io_dtype} is not supported; {self.name} "
                f"artifacts keep {', '.join(self.io_dtypes)} input and output"
            )
        return None

    def export(self, request: ExportRequest) -> ExportInfo:
        raise NotImplementedError

    def open(
        self,
        path: Path,
        manifest: Manifest,
        accelerator: Accelerator = Accelerator.CPU,
        threads: int = 1,
        **options: Any,
    ) -> Session:
        """Open the artifact with the target's numpy-only session module."""
        import importlib

        module = importlib.import_module(self.session_module)
        return module.open_session(Path(path), manifest, accelerator, threads, **options)

    def coverage(self, path: Path, manifest: Manifest, census: Census | None = None) -> Coverage:
        """What of the file runs on the runtime's fast path (its delegate, its int8 kernels);
        given the file's ``census`` (an export reads it once), derived from it, not read again.
        A target's coverage function takes the census: it never reads the file itself."""
        found = census if census is not None else self.census(path, manifest)
        return self.role_function("coverage")(Path(path), manifest, found)

    def runtime_code(self, file: str, options: dict[str, Any]) -> list[str]:
        """The lines of the runtime's own API that open ``file`` with ``options`` (the thread
        count and the tuning knobs), for an app to copy; [] where the target has none."""
        return []

    def describe(self, path: Path) -> FileFacts:
        """The file's own inputs and outputs (for files edgekit did not make)."""
        return self.role_function("describe")(Path(path))

    # a file of this format can be a source model (--model file.onnx)
    loads_source: ClassVar[bool] = False

    def load_source(
        self, path: Path, described: dict[str, Any], load_options: dict[str, Any]
    ) -> SourceModel:
        """The file as a source model; ``described`` is its inferred manifest."""
        raise NotImplementedError(f"{self.name}: its files are not source models")

    def convert_source(self, source: SourceModel, target: str) -> SourceModel:
        """A source this target loaded, as a model ``target`` exports (its frameworks)."""
        raise NotImplementedError(f"{self.name}: cannot convert its source for {target}")

    def census(self, path: Path, manifest: Manifest | None = None) -> Census:
        """Every op of the file with its compute dtype, weights, MACs and placement; the
        manifest edgekit wrote beside it (None: the file alone) may add what the format does
        not keep (a .pte's module paths)."""
        return self.role_function("census")(Path(path), manifest)

    def profile(
        self, path: Path, manifest: Manifest, threads: int, runs: int, warmup: int
    ) -> OpTimes:
        """Per-op times from the runtime's own profiler, on the host CPU."""
        return self.role_function("profile")(Path(path), manifest, threads, runs, warmup)

    def logged_cause(self, log: str) -> tuple[str, str] | None:
        """The line of what the runtime logged (``log``) that names the node it failed on, and
        that node's kind: what its exception left out. None: no such line."""
        return self.role_function("logged_cause")(log)

    def layer_errors(
        self, source: SourceModel, x: np.ndarray, names: list[str], work: Path
    ) -> LayerErrors:
        """This runtime's own per-layer int8 error, in dB, by torch module path (``names``:
        the layers), and why a layer has no figure."""
        return self.role_function("layer_errors")(source, x, names, work)

    def official_runner(self) -> OfficialRunner | None:
        """The runtime's own benchmark binary on a phone, or None."""
        return self.role_function("official_runner")() if "official_runner" in self.roles else None

    def trivial_model(self) -> Path | None:
        """The runtime's floor: a trivial model of this format shipped beside the target's
        module (``trivial.<suffix>``, made by scripts/trivial_models.py), or None."""
        import sys

        from edgekit.targets import suffix_of

        folder = Path(str(sys.modules[type(self).__module__].__file__)).parent
        found = folder / f"trivial{suffix_of(self.name)}"
        return found if found.is_file() else None

    def planned_memory(self, path: Path, details: dict[str, Any] | None = None) -> PlannedMemory:
        """The memory the runtime plans for the file's activations, read from the runtime's
        own API or the file format (``details``: the manifest's, where the export recorded
        it); where it cannot be read, why not."""
        if "planned_memory" in self.roles:
            return self.role_function("planned_memory")(Path(path), details)
        return PlannedMemory(None, f"{self.name}: {ROLES['planned_memory']}")

    def golden_files(self, root: Path, spec: dict[str, Any], artifact: Path) -> dict[str, str]:
        """Write into the golden bundle at ``root`` what the runtime's own tools check it with
        (a plain-Python runner; a .pte's BundledProgram; an .onnx's test data sets), from the
        bundle's ``spec`` and files; returns {what it is: its path in the bundle}."""
        if "golden_files" in self.roles:
            return self.role_function("golden_files")(Path(root), spec, Path(artifact))
        return {}

    def check(self) -> dict[str, Any]:
        """Doctor: can this machine export and run this target, and if not, why."""
        export_problems = [p for p in map(importable, self.export_modules) if p]
        run_problems = [p for p in map(importable, self.run_modules) if p]
        return {
            "export": not export_problems,
            "run": not run_problems,
            "problems": export_problems + run_problems,
        }


def importable(module: str) -> str | None:
    """None when ``module`` imports, else the one-line reason it does not."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
    return None


@dataclass
class FileFacts:
    """What a model file says about itself: every input and output, as the file declares them
    (dynamic dimensions as -1), and facts of its format (opset, producer, subgraphs)."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    facts: dict[str, Any] = field(default_factory=dict)
