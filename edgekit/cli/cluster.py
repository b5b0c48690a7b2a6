"""``edgekit cluster start|join|status|stop``: thin wrappers over ``ray start`` that advertise
this machine's devices as Ray resources, and stop only what edgekit started."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from edgekit.cli.app import cluster_app
from edgekit.cli.console import console
from edgekit.cli.options import JsonOption
from edgekit.errors import UserInputError

NodeIp = Annotated[
    str, typer.Option("--node-ip", help="this machine's address the other nodes reach")
]
Cpus = Annotated[int | None, typer.Option("--num-cpus", help="CPUs this node offers")]
Resources = Annotated[
    str | None, typer.Option("--resources", help='extra Ray resources as JSON, e.g. {"x": 1}')
]


def _extra(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"--resources '{text}': not JSON ({exc.msg})") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise UserInputError(f"--resources '{text}': expected an object of names to numbers")
    return {k: float(v) for k, v in value.items()}


@cluster_app.command("start")
def start(
    head: Annotated[bool, typer.Option("--head", help="start the head node")] = False,
    port: Annotated[int, typer.Option("--port")] = 6379,
    node_ip: NodeIp = "127.0.0.1",
    num_cpus: Cpus = None,
    resources: Resources = None,
) -> None:
    """Start the head node on this machine (its devices advertised)."""
    from edgekit.cluster.nodes import start_node

    if not head:
        raise UserInputError("cluster start: give --head (other machines: edgekit cluster join)")
    record = start_node(
        head=True, port=port, node_ip=node_ip, num_cpus=num_cpus, extra_resources=_extra(resources)
    )
    devices = sorted(k for k in record.resources if k.startswith("edgekit_device_"))
    console.print(
        f"head at {record.address} (pid {record.pid}); devices: "
        f"{', '.join(d.removeprefix('edgekit_device_') for d in devices)}"
    )
    console.print(f"on other machines: edgekit cluster join {record.address}")


@cluster_app.command("join")
def join(
    address: Annotated[str, typer.Argument(help="the head's HOST:PORT")],
    node_ip: NodeIp = "127.0.0.1",
    num_cpus: Cpus = None,
    resources: Resources = None,
) -> None:
    """Join this machine (and its devices) to the cluster at ADDRESS."""
    from edgekit.cluster.nodes import start_node

    record = start_node(
        head=False,
        address=address,
        node_ip=node_ip,
        num_cpus=num_cpus,
        extra_resources=_extra(resources),
    )
    console.print(f"joined {address} (pid {record.pid})")


@cluster_app.command("status")
def status(
    address: Annotated[
        str | None, typer.Argument(help="HOST:PORT (default: this machine's)")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The cluster's nodes with their devices, CPUs and edgekit version."""
    from edgekit.cluster.connect import cluster_nodes
    from edgekit.cluster.nodes import started_nodes

    if address is None:
        heads = [r.address for r in started_nodes() if r.role == "head"]
        if not heads:
            raise UserInputError("cluster status: no head started here; give ADDRESS")
        address = heads[0]
    nodes = cluster_nodes(address)
    if as_json:
        print(json.dumps(nodes, indent=2))
        return
    table = Table("node", "ip", "CPUs", "devices", "edgekit", title=f"cluster at {address}")
    for node in nodes:
        res = node["edgekit"]
        devices = [
            k.removeprefix("edgekit_device_") for k in res if k.startswith("edgekit_device_")
        ]
        extra = [
            k.removeprefix("edgekit_")
            for k in res
            if k.startswith(("edgekit_adb_", "edgekit_gpu_"))
        ]
        version = next(
            (k.removeprefix("edgekit_version_") for k in res if k.startswith("edgekit_version_")),
            "?",
        )
        table.add_row(
            node["id"][:12],
            str(node["ip"]),
            f"{node['cpus']:g}",
            ", ".join(devices + extra),
            version,
        )
    console.print(table)


@cluster_app.command("stop")
def stop() -> None:
    """Stop the nodes edgekit started on this machine (by process id; never ``ray stop``)."""
    from edgekit.cluster.nodes import stop_nodes

    stopped = stop_nodes()
    console.print(
        f"stopped {len(stopped)} node(s)"
        + (": " + ", ".join(f"{r.role} pid {r.pid}" for r in stopped) if stopped else "")
    )


@cluster_app.command("resources")
def resources_command(resources: Resources = None) -> None:
    """The Ray resources this machine's node advertises, as JSON: for a node started by other
    means (KubeRay's rayStartParams, a plain ``ray start --resources``)."""
    from edgekit.cluster.nodes import node_resources

    print(json.dumps(node_resources(_extra(resources)), sort_keys=True))
