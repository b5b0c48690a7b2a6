"""A connection to a Ray cluster for the length of a block (``local``: a head started on this
machine for the block, stopped after it)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from types import ModuleType
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
    try:
        _join(ray, address)
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


def _join(ray: ModuleType, address: str, runtime_env: dict[str, Any] | None = None) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with _quiet_stderr():
        ray.init(
            address=address,
            log_to_driver=False,
            logging_level=logging.ERROR,
            runtime_env=runtime_env,
        )
    _errors_to_stderr()


def _errors_to_stderr() -> None:
    """Ray's driver prints the cluster's error messages (a node's death among them) on stdout,
    whatever ``log_to_driver`` says (``listen_error_messages`` in ray/_private/worker.py of the
    pinned 2.60); stdout holds ``--json``'s document, so they go to stderr. The row that node
    ran says what happened in edgekit's own words."""
    from ray._private import worker

    printer = worker.print_to_stdstream
    if getattr(printer, "edgekit", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:  # noqa: FBT001 (Ray's own signature)
        printer({**data, "is_err": True} if data.get("pid") == "raylet" else data, ignore_prefix)

    to_stderr.edgekit = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def rejoin(ray: ModuleType, runtime_env: dict[str, Any]) -> None:
    """Join the same cluster again, as a new job whose runtime environment is
    ``runtime_env``: Ray uploads local ``py_modules`` (a user's model code) only for a job's
    own runtime environment, at ``ray.init`` (a task's takes URIs only), and which code a run
    ships is known only once its models are loaded, after the first join."""
    address = ray.get_runtime_context().gcs_address
    ray.shutdown()
    try:
        _join(ray, address, runtime_env)
    except Exception as exc:  # RuntimeEnvSetupError, ValueError (too large): one line
        modules = ", ".join(runtime_env.get("py_modules", []))
        raise UserInputError(
            f"{address}: cannot ship the models' code ({modules}) to the cluster "
            f"({first_line(exc)}); list what it need not ship in a .rayignore there, or install "
            "it on every node"
        ) from None


def cluster_nodes(address: str) -> list[dict[str, Any]]:
    """The alive nodes of the cluster at ``address``: id, ip, CPUs, edgekit resources."""
    with connected(address) as ray:
        nodes = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            nodes.append(
                {
                    "id": node["NodeID"],
                    "ip": node.get("NodeManagerAddress"),
                    "cpus": resources.get("CPU", 0),
                    "edgekit": {k: v for k, v in resources.items() if k.startswith("edgekit_")},
                }
            )
        return nodes
