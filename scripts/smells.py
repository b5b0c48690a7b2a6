"""Count what docs/development.md's rules and the design reviews track, over a tree (default:
this checkout): ``# fmt: skip`` lines, parameters typed ``Any``, library functions (outside
``cli/``) with more than 6 positional parameters, ``SimpleNamespace`` stand-ins, and modules
over 300 lines. ``python scripts/smells.py [ROOT]``; before/after figures in a closing note
come from here."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FOLDERS = ("edgekit", "targets", "quantize")  # the top-level folders edgekit is made of


def python_files(root: Path) -> list[Path]:
    return sorted(p for folder in FOLDERS if (root / folder).is_dir()
                  for p in (root / folder).rglob("*.py"))  # fmt: skip


def counts(root: Path) -> dict[str, int]:
    found = {"fmt: skip": 0, "Any-typed parameters": 0, "library functions > 6 positional": 0,
             "SimpleNamespace": 0, "modules > 300 lines": 0}  # fmt: skip
    for path in python_files(root):
        text = path.read_text()
        found["fmt: skip"] += text.count("# fmt: skip")
        found["SimpleNamespace"] += text.count("SimpleNamespace(")
        found["modules > 300 lines"] += len(text.splitlines()) > 300
        library = "cli" not in path.relative_to(root).parts
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            found["Any-typed parameters"] += sum(
                isinstance(a.annotation, ast.Name) and a.annotation.id == "Any" for a in every
            )
            positional = [a for a in [*arguments.posonlyargs, *arguments.args]
                          if a.arg not in ("self", "cls")]  # fmt: skip
            found["library functions > 6 positional"] += library and len(positional) > 6
    return found


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    for name, value in counts(root).items():
        print(f"{name}: {value}")
