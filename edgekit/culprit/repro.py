"""A repro folder a maintainer accepts: ``repro.py`` (edgekit's harness, the target's
``convert_block`` and what it imports of edgekit, such as the quantizer rules export applies,
copied as source, and a main that needs neither edgekit nor this machine), the block pickled
with its weights (``block.pt``), how it was called (``call.json``), its inputs as .npy, the
versions, the exact error, and the upstream repository it belongs to."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from edgekit.common.versions import package_version, tool_versions
from edgekit.culprit import harness

MAIN = """

RECIPE = {recipe!r}
MIN_SQNR_DB = {min_sqnr_db!r}
MIN_AGREEMENT = {min_agreement!r}
EXPECTED = {expected!r}


def main() -> None:
    import json
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    block = torch.load(here / "block.pt", weights_only=False).eval()
    call = json.loads((here / "call.json").read_text())
    module = BoundBlock(block, call["rest"], call["kwargs"]).eval()
    inputs = np.load(here / "inputs.npy")
    calibration_file = here / "calibration.npy"
    calibration = np.load(calibration_file) if calibration_file.exists() else None
    with torch.no_grad():
        reference = np.stack([module(torch.from_numpy(x)).numpy() for x in inputs])
    print("expected:", EXPECTED, flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        stage = lambda name: print("stage:", name, flush=True)  # noqa: E731
        run = convert_block(module, inputs[0], RECIPE, calibration, Path(scratch), stage)
        outputs = np.stack([run(x) for x in inputs])
    verdict = judged(reference, outputs, MIN_SQNR_DB, MIN_AGREEMENT)
    if verdict["mismatch"]:
        sys.exit(f"mismatch: {{verdict}}")
    print("no failure: converted, loaded and matched torch", verdict)


if __name__ == "__main__":
    main()
"""


def _body(module: Any, seen: set[str]) -> str:
    """A module's source without its docstring, its ``from __future__`` line, its imports of
    edgekit (the script carries their source) and the imports an earlier part of the script
    already made (``seen``)."""
    source = inspect.getsource(module)
    tree = ast.parse(source)
    lines = source.splitlines()
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("__future__", "edgekit")
        ):
            continue
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        text = "\n".join(lines[start - 1 : node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if text in seen:
                continue
            seen.add(text)
        kept.append(text)
    return "\n\n".join(kept)


def _edgekit_imports(module: Any) -> list[Any]:
    """The modules of edgekit that ``module`` imports at its top: the script carries their
    source before its own."""
    tree = ast.parse(inspect.getsource(module))
    names = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("edgekit")
    ]
    return [importlib.import_module(name) for name in names]


def script(
    convert_module: Any,
    recipe: str,
    min_sqnr_db: float,
    expected: str,
    about: str,
    *,
    min_agreement: float | None = None,
) -> str:
    """``min_agreement``: where the block is the whole model, judged on its logits' top-1."""
    head = f'"""{about}"""\n\nfrom __future__ import annotations\n\n'
    seen: set[str] = set()
    carried = [_body(module, seen) for module in _edgekit_imports(convert_module)]
    parts = [_body(harness, seen), *carried, _body(convert_module, seen)]
    main = MAIN.format(
        recipe=recipe, min_sqnr_db=min_sqnr_db, min_agreement=min_agreement, expected=expected
    )
    return head + "\n\n\n".join(parts) + main


def versions(packages: tuple[str, ...]) -> dict[str, str]:
    extra = {name: package_version(name) for name in packages}
    return tool_versions({name: version for name, version in extra.items() if version})


def write_folder(final: Path, files: dict[str, str], fill: Any) -> Path:
    """Write the folder beside ``final`` and rename it into place complete: ``fill(staging)``
    adds the block and its inputs, ``files`` the text files."""
    final = final.resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    try:
        fill(staging)
        for name, text in files.items():
            (staging / name).write_text(text)
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def builds_up_line(weakest: dict[str, Any], quote: str = "") -> str:
    """What a mismatch no block has alone means, and where most of it enters (culprit.json's
    ``weakest``): the README's words (``quote`` marks the path as code) and the CLI's."""
    return (
        f"no block fails alone: the error builds up from block to block; the lowest SQNR alone "
        f"is {quote}{weakest['path']}{quote} ({weakest['kind']}), {weakest['sqnr_db']:.1f} dB"
    )


def readme(record: dict[str, Any]) -> str:
    culprit = record["culprit"]
    outcome = culprit["outcome"]
    weakest = record.get("weakest")
    said = builds_up_line(weakest, quote="`") if weakest else ""
    builds_up = [f"{said[:1].upper()}{said[1:]}.", ""] if weakest else []
    return "\n".join(
        [
            f"# {record['target']}/{record['recipe']}: {outcome['failure']} failure in "
            f"`{culprit['path'] or '<model>'}` ({culprit['kind']})",
            "",
            f"Model: `{record['model']}`. Stage: {outcome['stage']}. "
            f"Op: {outcome['op'] or 'not named by the error'}.",
            "",
            "```",
            outcome["message"],
            "```",
            "",
            *builds_up,
            f"Belongs to: https://github.com/{record['upstream']}",
            "",
            "Run `python repro.py` in an environment with the versions below; it fails the same "
            "way (a hang hangs: stop it with Ctrl-C). `block.pt` is the block with the model's "
            f"own weights; unpickling it imports `{culprit['module']}`, which must be importable.",
            "",
            "```json",
            json.dumps(record["versions"], indent=2),
            "```",
            "",
        ]
    )
