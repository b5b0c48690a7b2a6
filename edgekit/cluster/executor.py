"""``edgekit run --cluster ADDRESS``: the run's cells as Ray tasks.

- An export runs on any edgekit node (one CPU); its file and manifest come back through Ray's
  object store (or a shared directory, ``--shared-dir``).
- A device pool runs on the node that has the device, pinned there (NodeAffinity), claiming
  that node's benchmark slot and **all its CPUs**: Ray's custom resources are bookkeeping only,
  so a pool that did not take the CPUs would share the node with an export. Two timings never
  share a node, nor does an export run beside one. The host CPU's pool and a board's (over
  SSH, with the driver's keys) run on the driver's node, the machine the user typed on.
- A pool has no retries and a deadline: a task whose node died fails in under a second
  (NodeDiedError), and only that pool's rows fail, with the reason; a retried task would wait
  for a resource only the dead node had.
- Ctrl-C cancels every task still running; ``run_matrix`` removes the partial run directory.
- A user's ``module:factory`` model runs on every node as it runs here: its code goes with
  the job's runtime environment (``py_modules``) and its weights file through the object store
  (``edgekit.cluster.shipping``). A node that still cannot import it fails that model's
  rows with the node's name and what to install there.
- Every row names its device and thread count: an export that failed is one failed row per
  device and thread count its artifact would have had.

The rows that come back are the rows a local run makes (each stamped with its node and its
pool's benchmark window), merged by ``run_matrix`` into one run directory, report and history
transaction."""

from __future__ import annotations

import socket
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edgekit import __version__
from edgekit.artifacts.artifact import Artifact, manifest_path
from edgekit.cluster import shipping
from edgekit.common.fileio import write_bytes_atomic, write_json_atomic
from edgekit.common.progress import Progress
from edgekit.devices import BOARD_SCHEME, DEFAULT_DEVICE
from edgekit.errors import DeviceUnavailable, EdgekitError, UserInputError, first_line
from edgekit.results import Row
from edgekit.run.cells import PoolResult, export_failed, failed_row
from edgekit.run.config import RunConfig
from edgekit.run.executor import Exported, ExportJob
from edgekit.run.subject import Subject
from edgekit.targets import get_target


class ClusterExecutor:
    """Cells as Ray tasks on the cluster ``ray`` is connected to."""

    tunes_here = False  # run --tune searches on this machine's CPU; the pools run elsewhere
    # (edgekit.run.executor.Executor is the contract it meets)

    def __init__(self, ray: Any, shared_dir: Path | None = None, address: str = "cluster") -> None:
        self.ray = ray
        self.shared_dir = Path(shared_dir) if shared_dir else None
        self.nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.address = address
        self.here = ray.get_runtime_context().get_node_id()
        self.pending: list[Any] = []
        self.timings: list[dict[str, Any]] = []  # each export's own time and node
        self.base_env = dict(ray.get_runtime_context().runtime_env or {})
        self.shipped: list[str] = []  # the models' code in the job's runtime environment
        check_versions(self.nodes)

    # -- exports ----------------------------------------------------------------------------
    def absent_devices(self, devices: list[str]) -> dict[str, str]:
        """None: a device may hang off any node, and its rows say so when none has it."""
        return {}

    def export_many(self, jobs: list[ExportJob], out_dir: Path, say: Progress) -> list[Exported]:
        """Every model's exports as tasks at once, so that they spread over all nodes."""
        if not jobs:
            return []
        for config, _ in jobs:
            self.require_devices(config)
        self.ship_code([subject.source for _, subject in jobs], say)
        weights = [self._weights(subject.source) for _, subject in jobs]
        task = self.ray.remote(num_cpus=1, resources={"edgekit_node": 0.001}, max_retries=1)(
            export_cell
        )
        cells = [(index, target, recipe) for index, (config, _) in enumerate(jobs)
                 for target in config.targets for recipe in config.recipes]  # fmt: skip
        # the longest first, so the last cells to start are short ones and the nodes finish
        # together: each target's export cost, then int8's calibration
        cells.sort(key=lambda cell: (-get_target(cell[1]).export_cost,
                                     not cell[2].startswith("int8")))  # fmt: skip
        refs = {}
        for index, target, recipe in cells:
            config, subject = jobs[index]
            refs[(index, target, recipe)] = task.remote(
                asdict(config), _model(subject.source), config.data, target, recipe,
                shared=self._shared(), weights=weights[index],
            )  # fmt: skip
        say(f"{len(refs)} export(s) scheduled on {len(self.nodes)} node(s)")
        deadline = max(config.timeout for config, _ in jobs) * 4
        made: list[Exported] = [([], []) for _ in jobs]
        for (index, target, recipe), result in self._gather(refs, deadline, say).items():
            exported, rows = made[index]
            config = jobs[index][0]
            if isinstance(result, Exception):
                error = self._failure(result)
                failed = failed_row(target, recipe, None, None, error, stage="export")
                failed.node = getattr(error, "node", None)  # known when a node could not import
                rows += export_failed(failed, config)
                continue
            self.timings.append({"model": jobs[index][0].model, "target": target,
                                 "recipe": recipe, "node": result["node"],
                                 "seconds": result["seconds"]})  # fmt: skip
            if "failed" in result:
                failed = Row.from_dict(result["failed"])
                failed.node = result["node"]
                rows += export_failed(failed, config)
            else:
                exported.append(_land(result, out_dir))
        return made

    # -- device pools -------------------------------------------------------------------------
    def device_pools(self, config: RunConfig, subject: Subject, exported: list[Artifact],
                     say: Progress) -> list[PoolResult]:  # fmt: skip
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        source = subject.source

        self.require_devices(config)
        if not exported:  # every export failed (its rows say why): nothing for a pool to time
            return []
        self.ship_code([source], say)
        files = [self._ship(artifact) for artifact in exported]
        model = None if source is None else _model(source)
        weights = self._weights(source)
        refs, missing = {}, []
        for device in config.devices:
            node = self.node_for(device, config)
            if node is None:
                missing.append(device)
                continue
            task = self.ray.remote(
                num_cpus=node["Resources"].get("CPU", 1), resources={"edgekit_bench_slot": 1},
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            )(device_cell)  # fmt: skip
            refs[device] = task.remote(asdict(config), device, files, model, config.data,
                                       weights)  # fmt: skip
        say(f"{len(refs)} device pool(s) scheduled")
        deadline = config.timeout * (len(exported) + 2) * len(config.threads) * 2
        pools = []
        results = self._gather(refs, deadline, say)
        for device in config.devices:
            if device in missing:
                reason = DeviceUnavailable(f"no node of the cluster has device {device}")
                pools.append(PoolResult(self._failed_rows(exported, device, config, reason)))
                continue
            result = results[device]
            if isinstance(result, Exception):
                error = self._failure(result)
                pools.append(PoolResult(self._failed_rows(exported, device, config, error)))
                continue
            pools.append(PoolResult([Row.from_dict(r) for r in result["rows"]],
                                    result["profiles"], result["node"],
                                    result["bench_started"], result["bench_finished"]))  # fmt: skip
        return pools

    def require_devices(self, config: RunConfig) -> None:
        """Bad input before any cell runs: a device (or adb serial) no live node advertises."""
        for device in config.devices:
            if self.node_for(device, config) is None:
                have = sorted({key.removeprefix("edgekit_device_") for n in self.nodes
                               for key in n["Resources"]
                               if key.startswith("edgekit_device_")})  # fmt: skip
                serial = config.device_options(device).get("serial")
                asked = f"{device} (serial {serial})" if serial else device
                raise UserInputError(
                    f"{self.address}: no node of the cluster has device {asked} "
                    f"(its nodes have: {', '.join(have) or 'none'})"
                )

    def node_for(self, device: str, config: RunConfig) -> dict | None:
        """The node that runs ``device``'s pool (see above), else the first advertising it."""
        if device.startswith(BOARD_SCHEME):
            return next((n for n in self.nodes if n["NodeID"] == self.here), None)
        wanted = f"edgekit_device_{device}"
        serial = config.device_options(device).get("serial")
        fitting = [n for n in self.nodes if wanted in n["Resources"]
                   and (serial is None or f"edgekit_adb_{serial}" in n["Resources"])]  # fmt: skip
        if device == DEFAULT_DEVICE:
            fitting.sort(key=lambda n: n["NodeID"] != self.here)
        return fitting[0] if fitting else None

    def _failed_rows(self, exported: list[Artifact], device: str, config: RunConfig,
                     error: EdgekitError) -> list[Row]:  # fmt: skip
        rows = [failed_row(a.target, a.recipe, device, threads, error, artifact=a)
                for a in exported for threads in config.threads]  # fmt: skip
        for row in rows:
            row.node = getattr(error, "node", None)  # known when its node could not import
        return rows

    # -- what the cells need besides the cluster's edgekit ------------------------------------
    def ship_code(self, sources: list[Any], say: Progress) -> None:
        """The models' own code into the job's runtime environment, before the first task that
        loads them: joins the cluster again when there is code it does not hold yet."""
        from edgekit.cluster.connect import rejoin

        wanted = shipping.code_to_ship([s.spec for s in sources if s is not None])
        new = [path for path in wanted if path not in self.shipped]
        if not new:
            return
        say(f"shipping the models' code to every node (Ray py_modules): {', '.join(new)}")
        rejoin(self.ray, shipping.runtime_env(self.base_env, [*self.shipped, *new]))
        self.shipped += new

    def _weights(self, source: Any) -> Any:
        """The model's state-dict file in the object store (once per phase: the object lives
        as long as this job), else None."""
        path = None if source is None else (source.load_options or {}).get("weights")
        return None if path is None else self.ray.put(Path(path).read_bytes())

    def _failure(self, exc: Exception) -> EdgekitError:
        """A task's exception as the row's error; a node that cannot import the model's code
        is told what to install there."""
        error = _failure(exc)
        if isinstance(error, shipping.CannotImport):
            hint = shipping.install_hint(error.missing, self.shipped)
            return shipping.CannotImport(f"{error}: {hint}", error.node, error.missing)
        return error

    # -- plumbing ----------------------------------------------------------------------------
    def _gather(self, refs: dict, deadline_s: float, say: Progress) -> dict:
        """Every task's result (or its exception); tasks past the deadline are cancelled."""
        self.pending = list(refs.values())
        results: dict = {}
        started = time.monotonic()
        try:
            while self.pending and time.monotonic() - started < deadline_s:
                done, self.pending = self.ray.wait(self.pending, num_returns=1, timeout=1.0)
                for ref in done:
                    key = next(k for k, v in refs.items() if v == ref)
                    try:
                        results[key] = self.ray.get(ref)
                    except Exception as exc:  # RayTaskError, NodeDiedError, WorkerCrashedError
                        results[key] = exc
                    say(f"done: {key}")
        except BaseException:
            self.cancel()
            raise
        for ref in self.pending:
            key = next(k for k, v in refs.items() if v == ref)
            results[key] = TimeoutError(f"no result within {deadline_s:.0f} s")
        self.cancel()
        return results

    def cancel(self) -> None:
        for ref in self.pending:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished or its node is gone
                continue
        self.pending = []

    def _shared(self) -> str | None:
        return None if self.shared_dir is None else str(self.shared_dir)

    def _ship(self, artifact: Artifact) -> dict[str, Any]:
        """An artifact for a task: its bytes, or its path in the shared directory."""
        if self.shared_dir is not None:
            path = self.shared_dir / artifact.path.name
            if not path.exists():
                write_bytes_atomic(path, artifact.path.read_bytes())
            return {"name": artifact.path.name, "path": str(path), "manifest": artifact.manifest}
        return {"name": artifact.path.name, "data": artifact.path.read_bytes(),
                "manifest": artifact.manifest}  # fmt: skip


def _model(source: Any) -> dict[str, Any]:
    """What a task needs to load the source model again (its weights travel apart)."""
    return {"spec": source.spec, "load_options": source.load_options}


def check_versions(nodes: list[dict]) -> None:
    """Every node must run this edgekit (its cells would give other rows)."""
    mine = f"edgekit_version_{__version__}"
    for node in nodes:
        resources = node.get("Resources", {})
        if "edgekit_node" not in resources:
            continue  # a plain Ray node: no edgekit cell is scheduled there
        if mine not in resources:
            theirs = [k.removeprefix("edgekit_version_") for k in resources
                      if k.startswith("edgekit_version_")] or ["unknown"]  # fmt: skip
            raise UserInputError(
                f"node {node.get('NodeManagerAddress')} ({node['NodeID'][:12]}) runs edgekit "
                f"{theirs[0]}, this is {__version__}: install the same edgekit on every node"
            )
    if not any("edgekit_node" in n.get("Resources", {}) for n in nodes):
        raise UserInputError("the cluster has no edgekit node (start them with edgekit cluster)")


def _failure(exc: Exception) -> EdgekitError:
    """A task's exception as the row's error: the node's death said as such."""
    kind = type(exc).__name__
    if "NodeDied" in kind or "WorkerCrashed" in kind or "Unavailable" in kind:
        return EdgekitError(f"its cluster node died while it ran ({kind}: {first_line(exc)})")
    cause = getattr(exc, "cause", None)
    if isinstance(cause, EdgekitError):
        return cause
    return EdgekitError(f"{kind}: {first_line(exc)}")


def _land(result: dict, out_dir: Path) -> Artifact:
    """An exported file from a task, written into the run's artifacts folder."""
    path = Path(out_dir) / result["name"]
    data = result["data"] if "data" in result else Path(result["path"]).read_bytes()
    write_bytes_atomic(path, data)
    write_json_atomic(manifest_path(path), result["manifest"].to_dict())
    return Artifact(path, result["manifest"])


def node_name() -> str:
    import ray

    return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:12]}"


def load_on_node(model: dict, weights: bytes | None, folder: Path) -> Any:
    """The source model on this node, its weights file written into ``folder``; a module this
    node cannot import is said with the node's name."""
    from edgekit.sources.load import reload_model

    try:
        return reload_model(shipping.localized(model, weights, folder))
    except UserInputError as exc:
        raise shipping.cannot_import(exc, model["spec"], node_name()) or exc from None


def export_cell(config: dict, model: dict, data: str, target: str, recipe: str, *,
                shared: str | None, weights: bytes | None = None) -> dict:  # fmt: skip
    """On a cluster node: one export, returned as bytes (or left in the shared directory)."""
    from edgekit.run.cells import export_one
    from edgekit.sources.data import load_dataset

    started = time.perf_counter()
    settings = RunConfig(**config)
    with tempfile.TemporaryDirectory(prefix="edgekit-cell-") as tmp:
        source = load_on_node(model, weights, Path(tmp))
        dataset = load_dataset(data, source.preprocess)
        artifact, failed = export_one(settings, source, dataset, target, recipe, Path(tmp))
        seconds = time.perf_counter() - started
        if failed is not None:
            return {"failed": failed.to_dict(), "node": node_name(), "seconds": seconds}
        manifest = artifact.manifest
        if weights is not None:  # the manifest names the file on the driver, as a local run's
            manifest = shipping.with_source_options(manifest, model["load_options"])
        result = {"name": artifact.path.name, "manifest": manifest, "node": node_name(),
                  "seconds": seconds}  # fmt: skip
        if shared:
            destination = Path(shared) / artifact.path.name
            write_bytes_atomic(destination, artifact.path.read_bytes())
            result["path"] = str(destination)
        else:
            result["data"] = artifact.path.read_bytes()
        return result


def device_cell(config: dict, device: str, files: list[dict], model: dict | None,
                data: str | None, weights: bytes | None = None) -> dict:  # fmt: skip
    """On the device's node: the device pool over the shipped artifacts."""
    from edgekit.run.cells import device_pool
    from edgekit.sources.data import load_dataset

    settings = RunConfig(**config)
    with tempfile.TemporaryDirectory(prefix="edgekit-pool-") as tmp:
        source = load_on_node(model, weights, Path(tmp)) if model else None
        folder = Path(tmp) / "artifacts"
        folder.mkdir()
        artifacts = []
        for item in files:
            path = folder / item["name"]
            path.write_bytes(item["data"] if "data" in item else Path(item["path"]).read_bytes())
            manifest = item["manifest"]
            source_entry = manifest.source
            if weights is not None and source_entry and source_entry.spec == model["spec"]:
                # the pool's baseline loads the source from the manifest: the weights here
                manifest = shipping.with_source_options(manifest, source.load_options)
            # the sidecar too: a runtime opened by path reads the manifest beside the file
            write_json_atomic(manifest_path(path), manifest.to_dict())
            artifacts.append(Artifact(path, manifest))
        dataset = None
        if source is not None:
            dataset = load_dataset(str(data), source.preprocess)
        elif artifacts and artifacts[0].classifier:
            from edgekit.measure.accuracy import dataset_for

            dataset = dataset_for(artifacts[0], str(data))
        pool = device_pool(settings, device, artifacts, source, dataset, lambda message: None)
    node = node_name()
    for row in pool.rows:
        row.node = node
    return {"rows": [row.to_dict() for row in pool.rows], "profiles": pool.profiles,
            "node": node, "bench_started": pool.bench_started,
            "bench_finished": pool.bench_finished}  # fmt: skip
