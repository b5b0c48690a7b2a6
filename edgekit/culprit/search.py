"""The search: convert the whole model as the failing cell did; if it fails, try the children
of the failing block, and descend into the first child that fails the same way, until no
child does. The block left is the smallest that reproduces the failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgekit.culprit.outcome import Outcome
from edgekit.culprit.record import parent_of
from edgekit.culprit.worker import BlockWorker


@dataclass
class Tried:
    path: str
    kind: str
    outcome: Outcome


@dataclass
class Search:
    """``culprit`` is None when the whole model converts (``whole.failure`` is None)."""

    whole: Outcome
    culprit: Tried | None
    tried: list[Tried] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # modules not convertible alone

    @property
    def weakest(self) -> Tried | None:
        """Where the whole model mismatches and no block does alone (the error builds up
        from block to block): the block tried whose own output has the lowest SQNR, where most
        of it enters. None otherwise."""
        if self.culprit is None or self.culprit.path or self.whole.failure != "mismatch":
            return None
        scored = [t for t in self.tried if t.path and "sqnr_db" in t.outcome.verdict]
        return min(scored, key=lambda t: t.outcome.verdict["sqnr_db"], default=None)

    @property
    def chain(self) -> list[str]:
        """The failing blocks from the root down to the culprit."""
        return [t.path for t in self.tried if t.outcome.same_failure(self.whole)]


def children_of(path: str, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The convertible blocks whose nearest convertible ancestor is ``path``, in call order."""
    convertible = [block["path"] for block in blocks if block["skipped"] is None]
    return [
        block
        for block in blocks
        if block["skipped"] is None
        and block["path"] != path
        and parent_of(block["path"], convertible) == path
    ]


def search(worker: BlockWorker, on_try: Callable[[Tried], None] = lambda _: None) -> Search:
    blocks = worker.start()
    by_path = {block["path"]: block for block in blocks}
    root = Tried("", by_path[""]["kind"], worker.attempt(""))
    on_try(root)
    result = Search(root.outcome, None, [root])
    result.skipped = {b["path"]: b["skipped"] for b in blocks if b["skipped"] is not None}
    if root.outcome.failure is None:
        return result
    current = root
    while True:
        for block in children_of(current.path, blocks):
            tried = Tried(block["path"], block["kind"], worker.attempt(block["path"]))
            on_try(tried)
            result.tried.append(tried)
            if tried.outcome.same_failure(root.outcome):
                current = tried
                break
        else:
            result.culprit = current
            return result
