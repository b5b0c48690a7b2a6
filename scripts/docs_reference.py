"""The command reference of the documentation, generated from the Typer app itself, so it cannot
drift from the code. A page writes ``<!-- edgekit-options: bench -->`` on a line of its own
where the options table of ``edgekit bench`` goes, and the build (this file is an MkDocs hook,
see mkdocs.yml) puts there the usage line, the arguments and every option with its type,
default and help, read from the same click command ``edgekit bench --help`` prints.

The build fails when a command has no page or a page names a command that does not exist;
tests/test_docs.py checks each page against the command's ``--help``.

    python scripts/docs_reference.py bench     # print one command's generated section
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from edgekit.cli import commands  # every leaf command by its path ("zoo list")

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(r"^<!-- edgekit-options: ([a-z0-9][a-z0-9 -]*?) -->$", re.M)
_TYPES = {str: "text", int: "integer", float: "number", bool: "flag", Path: "path"}


def _context(path: str, command: Any) -> Any:
    return command.context_class(command, info_name=f"edgekit {path}")


def option_names(path: str) -> set[str]:
    """Every spelling of every option of ``edgekit PATH`` (``--help`` included)."""
    command = commands()[path]
    names: set[str] = set()
    for param in command.get_params(_context(path, command)):
        if param.param_type_name == "option" and not getattr(param, "hidden", False):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def _cell(text: str) -> str:
    text = " ".join(text.replace("\\[", "[").split())
    return text.replace("|", "\\|")


def _type(param: Any) -> str:
    """The value's type, from the annotation typer built the parameter from."""
    import typing

    if getattr(param, "is_flag", False):
        return "flag"
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", str)
    while typing.get_args(annotation):  # str | None, list[Path]: the one type inside
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return _TYPES.get(annotation, getattr(annotation, "__name__", "text").lower())


# commands whose options default to None and take their defaults from a config object
# (edgekit run: edgekit.toml, else RunConfig's fields)
CONFIG_DEFAULTS = {"run": ("edgekit.run.config", "RunConfig")}


def _fallbacks(path: str) -> dict[str, Any]:
    if path not in CONFIG_DEFAULTS:
        return {}
    import dataclasses
    import importlib

    module, name = CONFIG_DEFAULTS[path]
    config = getattr(importlib.import_module(module), name)()
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}


def _default(param: Any, fallback: Any = None) -> str:
    default = param.default if param.default is not None else fallback
    if callable(default) or default is None or param.name == "help":
        return ""
    if getattr(param, "is_flag", False):
        if param.secondary_opts:  # --x/--no-x: name the one that is on
            return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
        return "" if default is False else "on"
    if isinstance(default, (list, tuple)):
        return f"`{','.join(str(item) for item in default)}`" if default else ""
    return f"`{default}`"


def section(path: str) -> str:
    """The generated part of ``edgekit PATH``'s page: usage, arguments, options."""
    command = commands()[path]
    context = _context(path, command)
    params = command.get_params(context)
    fallbacks = _fallbacks(path)
    usage = " ".join(command.collect_usage_pieces(context))
    lines = [f"```text\nedgekit {path} {usage}\n```", ""]
    arguments = [p for p in params if p.param_type_name == "argument"]
    if arguments:
        lines += ["| Argument | Type | Required | Description |", "| --- | --- | --- | --- |"]
        for param in arguments:
            many = " (one or more)" if param.nargs == -1 else ""
            required = "yes" if param.required else "no"
            lines.append(f"| `{param.name.upper()}` | {_type(param)}{many} | {required} "
                         f"| {_cell(getattr(param, 'help', '') or '')} |")  # fmt: skip
        lines.append("")
    lines += ["| Option | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for param in params:
        # a hidden option is an old spelling kept for a release: --help leaves it out too
        if param.param_type_name != "option" or getattr(param, "hidden", False):
            continue
        spellings = " / ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
        default = _default(param, fallbacks.get(param.name or ""))
        lines.append(f"| {spellings} | {_type(param)} | {default} "
                     f"| {_cell(param.help or '')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def render(markdown: str, where: str = "a page") -> str:
    """``markdown`` with every placeholder replaced by its command's section."""
    known = commands()

    def replace(match: re.Match[str]) -> str:
        path = match.group(1).strip()
        if path not in known:
            raise ValueError(f"{where}: no command 'edgekit {path}' (have: {', '.join(known)})")
        return section(path)

    return PLACEHOLDER.sub(replace, markdown)


def placeholders(markdown: str) -> list[str]:
    return [match.strip() for match in PLACEHOLDER.findall(markdown)]


# ---- the MkDocs hook (mkdocs.yml: hooks) ----

_seen: dict[str, str] = {}


# pages the navigation names that are written elsewhere and may not be in a checkout yet
OPTIONAL_PAGES = {"huggingface.md"}


def on_config(config: Any) -> Any:
    """Leave an absent optional page out of the navigation instead of failing the build on it
    (any other page the navigation names must exist)."""
    docs = Path(config["docs_dir"])

    def present(entry: Any) -> bool:
        if isinstance(entry, dict):
            [(_, value)] = entry.items()
            if isinstance(value, str) and value in OPTIONAL_PAGES:
                return (docs / value).is_file()
            if isinstance(value, list):
                value[:] = [item for item in value if present(item)]
        return True

    if config.get("nav"):
        config["nav"] = [entry for entry in config["nav"] if present(entry)]
    _seen.clear()
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    for path in placeholders(markdown):
        _seen[path] = page.file.src_uri
    docs = Path(config["docs_dir"])
    for name in OPTIONAL_PAGES - {p for p in OPTIONAL_PAGES if (docs / p).is_file()}:
        # a link to an optional page that is not there yet reads as its text
        link = re.compile(rf"\[([^\]]+)\]\((?:\.\./)*{re.escape(name)}(?:#[^)]*)?\)")
        markdown = link.sub(r"\1", markdown)
    return render(markdown, where=page.file.src_uri)


def on_post_build(**_: Any) -> None:
    from mkdocs.exceptions import PluginError

    missing = sorted(set(commands()) - set(_seen))
    if missing:
        raise PluginError(
            "docs: no page has the options of "
            + ", ".join(f"'edgekit {path}'" for path in missing)
            + " (add <!-- edgekit-options: PATH --> to a page under docs/commands/)"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for name in sys.argv[1:] or list(commands()):
        print(f"## edgekit {name}\n\n{section(name)}")
