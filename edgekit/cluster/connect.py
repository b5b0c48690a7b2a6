"""A connection to a Ray cluster for the length of a block (``local``: a head started on this
machine for the block, stopped after it)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any

from edgekit.errors import UserInputError, first_line

LOCAL = "local"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Ray's core worker writes its start-up warnings (no route to 8.8.8.8 on a closed
    network) straight to file descriptor 2; edgekit's own lines are what a user reads."""
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """``ray`` connected to ``address`` (HOST:PORT or ``local``); shut down afterwards."""
    import ray

    if ray.is_initialized():  # a caller connected already
        yield ray
        return
    started = None
    if address == LOCAL:
        from edgekit.cluster.nodes import start_node

        started = start_node(head=True, port=free_port())
        address = started.address
    else:
        from edgekit.cluster.nodes import reachable

        reachable(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        with _quiet_stderr():
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # ConnectionError, RuntimeError: Ray's words, one line
        if started is not None:
            from edgekit.cluster.nodes import stop_nodes

            stop_nodes([started])
        raise UserInputError(
            f"{address}: cannot join the Ray cluster ({first_line(exc)})"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()
        if started is not None:
            from edgekit.cluster.nodes import stop_nodes

            stop_nodes([started])


def cluster_nodes(address: str) -> list[dict[str, Any]]:
    """The alive nodes of the cluster at ``address``: id, ip, CPUs, edgekit resources."""
    with connected(address) as ray:
        nodes = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            nodes.append({
                "id": node["NodeID"],
                "ip": node.get("NodeManagerAddress"),
                "cpus": resources.get("CPU", 0),
                "edgekit": {k: v for k, v in resources.items() if k.startswith("edgekit_")},
            })  # fmt: skip
        return nodes
