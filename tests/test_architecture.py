"""The house rules, checked on the source (an AST walk).

1. the tree is the pipeline: every module belongs to a stage (its package under ``edgekit/``, or
   itself at the root) and imports only its own stage and the stages below it in :data:`ORDER`.
   A new module inherits its package's place. The one intrinsic exception is a split, not a
   waiver: ``sources`` holds the types the targets are handed (``source``, ``preprocess``,
   ``data``, low in the order) and what loads a model spec (``load``, the zoo, training, Hugging
   Face: above the targets, since ``load`` asks the onnx target to read an ``.onnx`` source);
2. report never imports a runtime;
3. only devices/ names a device, only targets/<name>/ names its target (the registries do);
4. no ``from x import _private`` across files;
5. a session module imports only numpy, its runtime, targets/session.py and edgekit's stdlib-only
   helpers (errors, common.quiet): the emulated guest runs it as it is, and so the guest's own
   files (the emulator's list, :data:`GUEST_MODULES`);
6. no import cycles, counting the imports inside functions too;
7. no module over 400 lines."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from edgekit.common.layout import MAPPED, source_files
from edgekit.devices import DEVICE_MODULES
from edgekit.devices.arm64_emu.emulator import GUEST_MODULES
from edgekit.targets import TARGET_MODULES

ROOT = Path(__file__).parent.parent
MAX_LINES = 400
STDLIB = set(sys.stdlib_module_names)
SESSION_RUNTIMES = {
    "tflite": {"ai_edge_litert", "tflite_runtime"},
    "onnx": {"onnxruntime"},
    "executorch": {"executorch", "executorch_numpy_runtime", "torch"},
}
GUEST_FILES = tuple(GUEST_MODULES)
# the layers, lowest first: docs/development.md's Layout in the same order
ORDER = (
    "edgekit.errors",
    "edgekit",  # the root __init__: the lazy public API (importlib by name) and the moved paths
    "edgekit.common",
    "edgekit.records",
    "edgekit.results",
    "edgekit.report",
    "sources-types",  # edgekit.sources.{source,logits,preprocess,data}
    "edgekit.quantize",
    "edgekit.targets",
    "edgekit.artifacts",
    "edgekit.sources",
    "edgekit.worker",
    "edgekit.devices",
    "edgekit.measure",
    "edgekit.analysis",
    "edgekit.tune",
    "edgekit.export",
    "edgekit.culprit",
    "edgekit.golden",
    "edgekit.run",
    "edgekit.cluster",
    "edgekit.cli",
    "edgekit.supervise",
    "edgekit.testing",
)
SOURCE_TYPES = {
    "edgekit.sources.source",
    "edgekit.sources.logits",
    "edgekit.sources.preprocess",
    "edgekit.sources.data",
}


MODULES = source_files()  # edgekit/ and the top-level targets/ and quantize/
TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}


def stage(module: str) -> str:
    """A module's stage: its package under edgekit/, or itself for a root module."""
    if module in SOURCE_TYPES:
        return "sources-types"
    parts = module.split(".")
    if len(parts) > 1 and any(name.startswith(f"edgekit.{parts[1]}.") for name in MODULES):
        return ".".join(parts[:2])
    return module


def _resolve(name: str) -> str | None:
    """The edgekit module an import names (the longest known prefix)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def imports(module: str) -> list[tuple[str, ast.AST]]:
    """Every imported name (``a.b`` for ``import a.b``, ``a.b.c`` for ``from a.b import c``)."""
    found = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            found += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # a submodule if it is one, else a name of the module
                full = f"{node.module}.{alias.name}"
                found.append((full if full in MODULES else node.module, node))
    return found


def edges(module: str) -> set[str]:
    targets = set()
    for name, _ in imports(module):
        resolved = _resolve(name)
        if resolved and resolved != module:
            targets.add(resolved)
    return targets


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_module_belongs_to_a_stage_of_the_order():
    unplaced = sorted(module for module in MODULES if stage(module) not in ORDER)
    assert not unplaced, f"add their package to ORDER: {unplaced}"


def test_stages_import_only_their_own_and_lower_stages():
    rank = {name: position for position, name in enumerate(ORDER)}
    upwards = [
        f"{module} ({stage(module)}) imports {target} ({stage(target)})"
        for module in MODULES
        for target in edges(module)
        if rank.get(stage(target), 0) > rank.get(stage(module), len(ORDER))
    ]
    assert not upwards, upwards


def test_report_imports_no_runtime():
    runtimes = {"torch", "onnxruntime", "ai_edge_litert", "executorch", "tensorflow", "onnx"}
    broken = [
        f"{module} imports {name}"
        for module in MODULES
        if _inside(module, "edgekit.report")
        for name, _ in imports(module)
        if name.split(".")[0] in runtimes
    ]
    assert not broken, broken


def _strings(module: str) -> set[str]:
    """String constants used as values: dict keys (option names such as ``cpu``) and torch's
    own device strings (``map_location="cpu"``, ``torch.device("cpu")``) are not edgekit's."""
    skipped: set[int] = set()
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Dict):
            skipped.update(id(key) for key in node.keys if key is not None)
        elif isinstance(node, ast.keyword) and node.arg == "map_location":
            skipped.add(id(node.value))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "device":
            skipped.update(id(n) for arg in node.args for n in ast.walk(arg))
    return {
        node.value
        for node in ast.walk(TREES[module])
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skipped
    }


def test_only_devices_name_a_device():
    broken = [
        f"{module} names {name!r}"
        for module in MODULES
        if not _inside(module, "edgekit.devices")
        for name in _strings(module) & set(DEVICE_MODULES)
    ]
    assert not broken, broken


def test_only_a_target_names_itself():
    broken = []
    for module in MODULES:
        for name in _strings(module) & set(TARGET_MODULES):
            own = _inside(module, f"edgekit.targets.{name}") or module == "edgekit.targets"
            if not own:
                broken.append(f"{module} names {name!r}")
    assert not broken, broken


def test_no_private_imports_across_files():
    broken = [
        f"{module}: from {node.module} import {alias.name}"
        for module in MODULES
        for node in ast.walk(TREES[module])
        if isinstance(node, ast.ImportFrom) and node.module and _resolve(node.module)
        for alias in node.names
        if alias.name.startswith("_") and alias.name != "__version__"
    ]
    assert not broken, broken


def _third_party(module: str) -> set[str]:
    roots = {name.split(".")[0] for name, _ in imports(module)}
    return {root for root in roots if root not in STDLIB and root != "edgekit"}


@pytest.mark.parametrize("target", list(TARGET_MODULES))
def test_a_session_module_needs_only_numpy_and_its_runtime(target):
    module = f"edgekit.targets.{target}.session"
    assert _third_party(module) <= {"numpy"} | SESSION_RUNTIMES[target], _third_party(module)
    allowed = {"edgekit.targets.session", *GUEST_FILES}
    assert edges(module) <= allowed, edges(module) - allowed


def test_the_guests_own_files_need_only_numpy():
    for module in (*GUEST_FILES, "edgekit.devices.arm64_emu.guest"):
        assert _third_party(module) <= {"numpy"}, (module, _third_party(module))
        assert edges(module) <= set(GUEST_FILES), (module, edges(module))


def test_no_import_cycles():
    graph = {module: edges(module) for module in MODULES}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles[:5]


def test_no_module_is_over_400_lines():
    long = {
        name: n
        for name, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


MAX_POSITIONAL = 6
# the built-in model's constructor: its source is part of the shipped weights' cache key
# (tests/test_training.py), so changing its signature means retraining and shipping new weights
ALLOWED_POSITIONAL = {("edgekit.sources.architectures", "__init__")}


def test_no_function_outside_the_cli_takes_more_than_6_positional_parameters():
    """Past six, a call reads as a row of values with no names: such a function takes the rest
    by keyword, or a record (the CLI's commands take what typer hands them)."""
    crowded = [
        f"{name}:{node.lineno} {node.name}"
        for name, tree in TREES.items()
        if not name.startswith("edgekit.cli.")
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and len([a for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")])
        > MAX_POSITIONAL
        and (name, node.name) not in ALLOWED_POSITIONAL
    ]
    assert not crowded, crowded


def _layout_entries() -> list[str]:
    """The stages the development page's Layout lists under ``edgekit/``, in its order."""
    text = (ROOT / "docs" / "development.md").read_text()
    block = text.split("## Layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    lines = block.split("edgekit/\n", 1)[1].splitlines()
    entries = []
    for line in lines:
        if not line.startswith("  ") or line.startswith("   "):
            if not line.startswith("  "):
                break  # the next top-level entry (tests/): the package is done
            continue
        name = line.split()[0].rstrip("/")
        entries.append(
            "edgekit" if name == "__init__.py" else f"edgekit.{name.removesuffix('.py')}"
        )
    return entries


def test_the_layout_page_is_the_tree_in_the_order_of_its_stages():
    block = (ROOT / "docs" / "development.md").read_text().split("```text", 1)[1]
    for package, folder in MAPPED.items():  # at the top level, and in its place among the layers
        assert f"\n{folder}/ " in block and f"\n  {folder}/ ->" in block, package
    listed = _layout_entries()
    # sources is listed once, where its types sit (lowest of its two places)
    stages = [
        "edgekit.sources" if n == "sources-types" else n for n in ORDER if n != "edgekit.sources"
    ]
    assert listed == stages, (listed, stages)


def test_the_public_functions_take_their_options_by_name():
    """``export_artifact(source, data, "onnx", "int8", out_dir=...)``: what a call names stays
    right when a parameter is added; only the subject of a call is positional."""
    import inspect

    import edgekit

    positional_options = [
        f"{name}({parameter.name})"
        for name in edgekit._API
        if inspect.isfunction(function := getattr(edgekit, name))
        for index, parameter in enumerate(inspect.signature(function).parameters.values())
        if index
        and parameter.default is not inspect.Parameter.empty
        and parameter.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert not positional_options
