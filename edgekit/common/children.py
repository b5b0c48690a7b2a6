"""What a child Python process that edgekit starts needs from its parent, and what it said
last: shared by the culprit's worker and the bounded conversion (``export --timeout``)."""

from __future__ import annotations

import os
import sys


def child_environment(**extra: str) -> dict[str, str]:
    """This environment, with a PYTHONPATH through which the child imports what this process
    imported (the user's model module among them), and ``extra`` on top."""
    paths = [entry for entry in sys.path if entry and os.path.isdir(entry)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **extra)


def last_words(output: bytes | str) -> str:
    """The last non-blank line a process printed (300 characters at most)."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "it said nothing"
