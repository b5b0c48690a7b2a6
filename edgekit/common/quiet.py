"""Every filter of the libraries' log chatter, in one place. Standard library only (the arm64
guest runs it).

Native runtimes (LiteRT, TensorFlow, ExecuTorch) log straight to file descriptor 2, around
Python's ``sys.stderr``: ``quiet_native`` captures fd 2 for a block, drops the known harmless
lines and passes everything else through, so real errors still reach the user. The Python side
(warnings, loggers, progress bars printed to stdout) is ``quiet_python``."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

# Lines LiteRT, TensorFlow, torchao and litert-torch write straight to fd 2 on every run. They
# are dropped; anything else written while a converter or runtime works is passed through.
CHATTER = re.compile(
    "|".join(
        (
            r"Created TensorFlow Lite XNNPACK delegate for CPU",
            r"Subgraph reshaping is enabled by default",
            r"^INFO: ",
            r"^I\d{4} ",
            r"All log messages before absl::InitializeLog",
            r"Logging before InitGoogle",
            r"NPU accelerator could not be loaded",
            r"IntelOpenvino|libopenvino",
            r"artificially reduced from",
            r"Failed to load .*torchao/_C|Detected no triton",
            r"oneDNN custom operations are on",
            r"cpu_feature_guard|^To enable the following instructions",
            r"is an Enum subclass and is now natively supported",
            r"fully_quantize: \d+, inference_type",
            r"Please consider providing the trackable_obj",
            r"Statefulness",
            r"Ignored output_format|Ignored drop_control_dependency",
            r"tf_tfl_flatbuffer_helpers|flatbuffer_export\.cc",
            # ExecuTorch's runtime probing the CPU and sizing its threadpool
            r"cpuinfo_utils\.cpp|Resetting threadpool to",
        )
    )
)


@dataclass
class Captured:
    lines: list[str] = field(default_factory=list)
    echo: bool = True  # pass non-noise lines on to the real stderr when the block ends

    def kept(self, extra: re.Pattern[str] | None = None) -> list[str]:
        """The lines that are not the runtimes' usual chatter (nor ``extra``)."""
        return [
            line
            for line in self.lines
            if line.strip() and not CHATTER.search(line) and not (extra and extra.search(line))
        ]

    def said(self) -> list[str]:
        """What the runtime said that is not its usual chatter, each without the
        ``[file.cpp:NN]`` a native log line starts with (for an error message)."""
        return [re.sub(r"^\[[\w.]+:\d+\]\s*", "", line) for line in self.kept()]


def _on_fd2() -> bool:
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a StringIO, a test's capture
        return False


@contextlib.contextmanager
def quiet_native(also: tuple[str, ...] = ()) -> Iterator[Captured]:
    """Capture fd 2 for a block: the C++ runtimes log there, around ``sys.stderr``. ``also``:
    patterns of lines harmless in this block only (a warning that matters elsewhere)."""
    extra = re.compile("|".join(also)) if also else None
    captured = Captured()
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to capture (a daemon): nothing to filter either
        yield captured
        return
    # and Python's sys.stderr where a caller replaced it (a test's capture): pybind11 modules
    # route their C++ log through it, which is fd 2 otherwise
    python_side = io.StringIO()
    replaced = contextlib.nullcontext() if _on_fd2() else contextlib.redirect_stderr(python_side)
    try:
        with tempfile.TemporaryFile() as sink, replaced:
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                captured.lines.extend(sink.read().decode(errors="replace").splitlines())
    finally:
        captured.lines.extend(python_side.getvalue().splitlines())
        kept = captured.kept(extra)
        if captured.echo and kept:
            sys.stderr.write("\n".join(kept) + "\n")


@contextlib.contextmanager
def quiet_python(
    env: dict[str, str] | None = None,
    loggers: tuple[str, ...] = (),
    messages: tuple[str, ...] = (),
    *,
    stdout: bool = False,
) -> Iterator[None]:
    """Silence known Python-side chatter for a block: set ``env`` (a library's progress switch),
    raise ``loggers`` to ERROR, ignore FutureWarning/DeprecationWarning and warnings matching
    ``messages``, and (``stdout``) swallow what the block prints to ``sys.stdout``."""
    saved_env = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    levels = {name: logging.getLogger(name).level for name in loggers}
    for name in loggers:
        logging.getLogger(name).setLevel(logging.ERROR)
    sink = contextlib.redirect_stdout(io.StringIO()) if stdout else contextlib.nullcontext()
    try:
        with warnings.catch_warnings(), sink:
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            for message in messages:
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


VERBOSE_ENV = "EDGEKIT_VERBOSE"
# Loggers of the libraries a user's model imports (transformers pulls in torchao and torch's
# pytree): their import-time chatter says nothing about the user's model.
USER_CODE_LOGGERS = ("transformers", "torchao", "torch.utils._pytree")


def verbose() -> bool:
    """``EDGEKIT_VERBOSE=1``: the libraries' chatter is shown, nothing filtered."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


@contextlib.contextmanager
def quiet_user_code() -> Iterator[None]:
    """Around a user's model code (its import, its factory, ``from_pretrained``): the loggers of
    the libraries it imports raised to ERROR, their deprecation warnings ignored; errors and
    anything else still get through. ``verbose()`` shows every warning, the CLI's too."""
    if verbose():
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # the CLI ignores warnings; verbose asks for them
            yield
        return
    with quiet_python(loggers=USER_CODE_LOGGERS):
        yield


class DropMessages(logging.Filter):
    """Drops log records whose message contains one of ``fragments`` (known-harmless noise)."""

    def __init__(self, *fragments: str) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(fragment in message for fragment in self.fragments)


def drop_log_messages(logger: str, *fragments: str) -> None:
    """Install (once) a filter on ``logger`` that drops records containing ``fragments``."""
    target = logging.getLogger(logger)
    if not any(isinstance(f, DropMessages) for f in target.filters):
        target.addFilter(DropMessages(*fragments))
