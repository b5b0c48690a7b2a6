"""The documentation as a user meets it: every example marked runnable in docs/*.md and
README.md runs as written and prints what the page says; every command's page lists exactly the
options its --help lists; and no page names what only this project's developers know.

A runnable example is a fenced block right after an HTML comment (docs/development.md,
"Examples that run")::

    <!-- runnable expect="top-1" exit=0 timeout=60 -->
    ```bash
    edgekit eval artifacts/model.onnx
    ```

``bash``/``sh`` blocks run under ``bash -e``; ``console`` blocks run their ``$ `` lines (the other
lines are the output a reader sees); ``python`` blocks run with this interpreter. The blocks of
one page run in order in one temporary folder (a later block may use an earlier one's files),
with this environment's ``bin`` first on PATH; pages run side by side. Each ``expect`` must be
a substring of the output (stdout and stderr together), and the exit code must be ``exit``
(default 0). A failure names the page, the block and its line. The flag ``long`` (``<!-- runnable
long -->``) leaves the block to ``make test-all``, as a ``long`` test; a page runs up to its last
selected block."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import load_script

from edgekit.common.layout import source_files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!--\s*runnable\b(?P<attrs>[^>]*?)-->", re.M)
FENCE = re.compile(
    r"[ \t]*\n(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)\n(?P=indent)```", re.S
)
ATTR = re.compile(r'(?P<key>\w+)=(?:"(?P<quoted>[^"]*)"|(?P<bare>\S+))')
LANGUAGES = {"bash", "sh", "shell", "console", "python"}
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, as a failure names it
    index: int  # 1-based, among the page's runnable blocks
    line: int
    lang: str
    body: str
    expect: tuple[str, ...] = ()
    exit: int = 0
    timeout: float = DEFAULT_TIMEOUT_S
    long: bool = False  # `<!-- runnable long -->`: left to `make test-all`, as a `long` test

    @property
    def where(self) -> str:
        return f"{self.page}, runnable block {self.index} (line {self.line})"


@dataclass
class Outcome:
    block: Block
    error: str | None = None  # None: it ran as the page says
    output: str = ""


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def runnable_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The page's runnable blocks; a marker without a block of a known language right after it
    is an error (a typo must not turn an example into prose nobody runs)."""
    text = path.read_text() if text is None else text
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    blocks = []
    inside = _fenced(text)
    for match in MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if line in inside:  # a marker shown inside a code block (how to write one) is text
            continue
        fence = FENCE.match(text, match.end())
        where = f"{name}, line {line}"
        if fence is None or fence.group("lang") not in LANGUAGES:
            raise ValueError(f"{where}: a runnable marker must be followed by a ```bash, "
                             "```console or ```python block")  # fmt: skip
        options: dict[str, list[str]] = {}
        flags = ATTR.sub("", match.group("attrs")).split()
        if set(flags) - {"long"}:
            raise ValueError(f"{where}: unknown runnable flag(s) {', '.join(sorted(flags))}")
        for attr in ATTR.finditer(match.group("attrs")):
            value = attr.group("quoted") if attr.group("quoted") is not None else attr.group("bare")
            options.setdefault(attr.group("key"), []).append(value)
        unknown = set(options) - {"expect", "exit", "timeout"}
        if unknown:
            raise ValueError(f"{where}: unknown runnable option(s) {', '.join(sorted(unknown))}")
        indent = fence.group("indent")
        body = "\n".join(line.removeprefix(indent) for line in fence.group("body").splitlines())
        blocks.append(Block(
            name, len(blocks) + 1, line + text.count("\n", match.end(), fence.start("lang")),
            fence.group("lang"), body, tuple(options.get("expect", ())),
            int(options.get("exit", ["0"])[-1]),
            float(options.get("timeout", [DEFAULT_TIMEOUT_S])[-1]), "long" in flags,
        ))  # fmt: skip
    return blocks


def _fenced(text: str) -> set[int]:
    """The line numbers inside fenced code blocks (a longer fence may hold shorter ones)."""
    inside, fence = set(), ""
    for number, line in enumerate(text.splitlines(), 1):
        ticks = re.match(r"\s*(`{3,})", line)
        if fence:
            if ticks and ticks.group(1) == fence and not line.strip()[len(fence) :]:
                fence = ""
            else:
                inside.add(number)
        elif ticks:
            fence = ticks.group(1)
    return inside


def _command(block: Block, folder: Path) -> list[str]:
    if block.lang == "python":
        script = folder / f".block-{block.index}.py"
        script.write_text(block.body + "\n")
        return [sys.executable, script.name]
    if block.lang == "console":  # the `$ ` lines are what a reader types; the rest is output
        typed: list[str] = []
        for line in block.body.splitlines():
            if line.startswith("$ "):
                typed.append(line[2:])
            elif typed and typed[-1].endswith("\\"):  # a command continued on the next line
                typed.append(line)
        script = "\n".join(typed)
    else:
        script = block.body
    return ["bash", "-e", "-o", "pipefail", "-c", script]


def run_block(block: Block, folder: Path) -> Outcome:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)  # what the page sets, nothing of the test session's
    try:
        done = subprocess.run(
            _command(block, folder), cwd=folder, env=env, capture_output=True, text=True,
            timeout=block.timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
        return Outcome(block, f"{block.where}: still running after {block.timeout:.0f} s",
                       output or "")  # fmt: skip
    output = done.stdout + done.stderr
    problems = []
    if done.returncode != block.exit:
        problems.append(f"exit {done.returncode}, the page expects {block.exit}")
    missing = [text for text in block.expect if text not in output]
    if missing:
        problems.append("the output lacks " + ", ".join(repr(text) for text in missing))
    error = f"{block.where}: {'; '.join(problems)}" if problems else None
    return Outcome(block, error, output)


def run_page(blocks: list[Block], folder: Path) -> list[Outcome]:
    """The page's blocks in order, in one folder; after a failure the rest are not run."""
    outcomes: list[Outcome] = []
    for block in blocks:
        if outcomes and outcomes[-1].error:
            failed = outcomes[-1].block
            outcomes.append(Outcome(block, f"{block.where}: not run, since block {failed.index} "
                                           f"(line {failed.line}) of the page failed"))  # fmt: skip
            continue
        outcomes.append(run_block(block, folder))
    return outcomes


def explain(outcome: Outcome) -> str:
    tail = "\n".join(outcome.output.splitlines()[-40:])
    block = outcome.block.body
    return f"{outcome.error}\n--- the block ---\n{block}\n--- its output (end) ---\n{tail}"


ALL_BLOCKS = [block for page in pages() for block in runnable_blocks(page)]


class PageRuns:
    """Every page with selected blocks runs in a thread of its own (its blocks in order, up to
    the last selected one), started once for the whole session."""

    def __init__(self, selected: list[Block], workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="docs")
        self._folders = tempfile.TemporaryDirectory(prefix="edgekit-docs-")
        self._futures: dict[str, Future[list[Outcome]]] = {}
        self._lock = threading.Lock()
        by_page: dict[str, int] = {}
        for block in selected:
            by_page[block.page] = max(by_page.get(block.page, 0), block.index)
        # the pages with the most blocks first: they take the longest
        for page, last in sorted(by_page.items(), key=lambda item: -item[1]):
            blocks = [b for b in ALL_BLOCKS if b.page == page and b.index <= last]
            folder = Path(self._folders.name) / re.sub(r"\W", "_", page)
            folder.mkdir()
            self._futures[page] = self._pool.submit(run_page, blocks, folder)

    def outcome(self, block: Block) -> Outcome:
        return self._futures[block.page].result()[block.index - 1]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._folders.cleanup()


@pytest.fixture(scope="session")
def page_runs(request):
    chosen = [item.callspec.params["block"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_a_runnable_example_runs_as_written"
              and hasattr(item, "callspec")]  # fmt: skip
    runs = PageRuns(chosen, workers=max(2, os.cpu_count() or 2))
    yield runs
    runs.close()


@pytest.mark.parametrize("block", [
    pytest.param(block, marks=pytest.mark.long) if block.long else block for block in ALL_BLOCKS
], ids=lambda block: f"{block.page}:{block.line}")  # fmt: skip
def test_a_runnable_example_runs_as_written(block, page_runs):
    outcome = page_runs.outcome(block)
    assert outcome.error is None, explain(outcome)


def test_the_pages_have_runnable_examples_of_the_commands_a_newcomer_types():
    typed = "\n".join(block.body for block in ALL_BLOCKS)
    for command in ("edgekit --help", "edgekit doctor", "edgekit export", "edgekit eval",
                    "import edgekit"):  # fmt: skip
        assert command in typed, f"no runnable example types {command!r}"
    heavy = [b.where for b in ALL_BLOCKS if re.search(r"make demo|edgekit run\b", b.body)]
    assert not heavy, f"heavy examples marked runnable: {heavy}"


def test_a_failing_example_names_its_page_and_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n<!-- runnable -->\n```bash\necho one > one.txt\n```\n\ntext\n\n"
        '<!-- runnable expect="two" -->\n```console\n$ cat one.txt\ntwo\n```\n\n'
        "<!-- runnable -->\n```python\nprint('never')\n```\n"
    )
    first, second, third = run_page(runnable_blocks(page), tmp_path)
    assert first.error is None
    assert second.error == "page.md, runnable block 2 (line 11): the output lacks 'two'"
    assert "block 2 (line 11) of the page failed" in third.error
    assert "page.md, runnable block 3 (line 17)" in third.error
    exits = tmp_path / "exits.md"
    exits.write_text("<!-- runnable exit=2 -->\n```bash\nexit 3\n```\n")
    [outcome] = run_page(runnable_blocks(exits), tmp_path)
    assert outcome.error == "exits.md, runnable block 1 (line 2): exit 3, the page expects 2"
    shown = tmp_path / "shown.md"  # how to write a marker, inside a longer fence: not run
    shown.write_text("````markdown\n<!-- runnable -->\n```bash\nexit 1\n```\n````\n")
    assert runnable_blocks(shown) == []
    typo = tmp_path / "typo.md"
    typo.write_text("<!-- runnable -->\n```text\nedgekit\n```\n")
    with pytest.raises(ValueError, match=r"typo.md, line 1: a runnable marker must be followed"):
        runnable_blocks(typo)
    typo.write_text('<!-- runnable expects="x" -->\n```bash\ntrue\n```\n')
    with pytest.raises(ValueError, match="unknown runnable option"):
        runnable_blocks(typo)
    typo.write_text('<!-- runnable lnog expect="x" -->\n```bash\ntrue\n```\n')
    with pytest.raises(ValueError, match="unknown runnable flag"):
        runnable_blocks(typo)
    nightly = tmp_path / "nightly.md"
    nightly.write_text('<!-- runnable long expect="x" -->\n```bash\necho x\n```\n')
    [block] = runnable_blocks(nightly)
    assert block.long and block.expect == ("x",)


# ---- the command reference against --help ----


REFERENCE = load_script("docs_reference")
COMMANDS = list(REFERENCE.commands())


def _help_options(path: str) -> set[str]:
    """The option spellings the Options panel of ``edgekit PATH --help`` lists."""
    from typer.testing import CliRunner

    from edgekit.cli import app

    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    found, inside = set(), False
    for line in result.output.splitlines():
        if line.startswith("╭─ Options"):
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside:
            row = re.match(r"│ (?:\* +)?(--?[\w-]+(?: +--?[\w-]+)*)", line)
            if row:
                found.update(row.group(1).split())
    return found


def _page_options(path: str) -> tuple[str, set[str]]:
    """The page that holds ``edgekit PATH``'s options, and the option spellings it lists."""
    holders = [page for page in sorted((DOCS / "commands").glob("*.md"))
               if path in REFERENCE.placeholders(page.read_text())]  # fmt: skip
    assert len(holders) == 1, f"'edgekit {path}': options on {len(holders)} pages, not 1"
    rendered = REFERENCE.section(path)
    table = rendered[rendered.index("| Option |") :]
    spelled = set()
    for row in table.splitlines()[2:]:
        spelled.update(re.findall(r"`(--?[\w-]+)`", row.split("|")[1]))
    return holders[0].name, spelled


@pytest.mark.parametrize("path", COMMANDS)
def test_each_command_page_lists_exactly_the_options_of_its_help(path):
    page, listed = _page_options(path)
    helped = _help_options(path)
    assert helped, f"edgekit {path} --help lists no options"
    assert listed == helped, (
        f"docs/commands/{page} for 'edgekit {path}': missing {sorted(helped - listed)}, "
        f"not in --help {sorted(listed - helped)}"
    )


def test_every_command_has_a_page_and_every_page_a_command():
    named = {path for page in (DOCS / "commands").glob("*.md")
             for path in REFERENCE.placeholders(page.read_text())}  # fmt: skip
    assert named == set(COMMANDS)


def test_the_help_panel_parser_sees_short_and_negative_spellings():
    assert {"--target", "-t", "--help"} <= _help_options("export")
    assert {"--xnnpack", "--no-xnnpack"} <= _help_options("bench")


# ---- words a user cannot know ----

FORBIDDEN = {
    "an issue number": re.compile(r"(?<![A-Z0-9_] )(?<![\w&/])#\d+\b"),
    "an issue": re.compile(r"\bissues?\b", re.I),
    "a review": re.compile(r"\breview(?:s|ed|er|ers)?\b", re.I),
    "the shared folder": re.compile(r"\.\./shared|\bshared/(?:review|tools|probe)"),
    "a development machine's path": re.compile(r"(?<![\w.~])/(?:work|tmp|root|home|opt)/"),
    "internal words": re.compile(r"the new house|shared perf probe|\bthe house\b", re.I),
}
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)")


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_no_page_names_an_issue_a_review_or_a_folder_outside_the_repository(page):
    text = page.read_text()
    found = []
    for what, pattern in FORBIDDEN.items():
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"line {line}: {what} ({match.group(0)!r})")
    for match in LINK.finditer(text):
        target = match.group("target")
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(ROOT):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"line {line}: a link out of the repository ({target})")
    assert not found, f"{page.relative_to(ROOT)}: " + "; ".join(found)


def test_the_word_check_catches_what_it_is_for():
    caught = [what for what, pattern in FORBIDDEN.items()
              for text in ("fixed in #25", "see the issue", "the review said", "../shared/tools",
                           "/work/main/x", "the new house")
              if pattern.search(text)]  # fmt: skip
    assert caught == list(FORBIDDEN), caught  # each pattern catches its own example, only it
    assert not any(pattern.search("FULLY_CONNECTED #3, ~/.cache/edgekit, /data/local/tmp/x")
                   for pattern in FORBIDDEN.values())  # fmt: skip


def test_the_shell_examples_quote_cleanly():
    # a console block's typed lines must be shell a reader can paste
    for block in ALL_BLOCKS:
        if block.lang == "console":
            for line in block.body.splitlines():
                if line.startswith("$ "):
                    shlex.split(line[2:])


SPHINX_ROLE = re.compile(r":(?:class|func|mod|data|meth|attr|exc|obj):`")


def test_no_docstring_uses_a_sphinx_role_the_api_page_would_print_raw():
    # mkdocstrings renders a docstring as markdown: ":class:`X`" reaches the page as it is
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in source_files().values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SPHINX_ROLE.search(line)
    ]
    assert not found, "write ``name`` instead of a role: " + ", ".join(found)
    assert SPHINX_ROLE.search("see :class:`SourceModel`") and not SPHINX_ROLE.search("``X``")
