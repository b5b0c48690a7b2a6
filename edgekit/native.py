"""Native runtimes (LiteRT, TensorFlow, ExecuTorch) log straight to file descriptor 2, around
Python's ``sys.stderr``. ``quiet_native`` captures fd 2 for a block, drops the known harmless
lines and passes everything else through, so real errors still reach the user."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

# Lines LiteRT, TensorFlow, torchao and litert-torch write straight to fd 2 on every run. They
# are dropped; anything else written while a converter or runtime works is passed through.
NOISE = re.compile(
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


@contextlib.contextmanager
def quiet_native() -> Iterator[Captured]:
    """Capture fd 2 for a block: the C++ runtimes log there, around ``sys.stderr``."""
    captured = Captured()
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to capture (a daemon): nothing to filter either
        yield captured
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.lines.extend(sink.read().decode(errors="replace").splitlines())
            kept = [line for line in captured.lines if line.strip() and not NOISE.search(line)]
            if captured.echo and kept:
                sys.stderr.write("\n".join(kept) + "\n")
