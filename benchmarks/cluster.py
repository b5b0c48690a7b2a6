"""A two-model matrix on a two-node loopback Ray cluster against the same matrix run locally.
Each node is pinned to a core of its own (``taskset``: the head on CPU 0, the second node on
CPU 1) and the local run to CPU 0, so "two nodes" means two machines of one core each against
one such machine. Measures the export phase (target: at least 1.6x faster on two nodes), the
scheduling overhead per export cell (target: under 0.5 s), that no two benchmarks overlap on a
node (from the rows' recorded windows), and each row's p50 against the local run's. Runs inside
a network namespace of its own (``unshare -n``) so that Ray listens on loopback only. Writes
benchmarks/CLUSTER.md and benchmarks/cluster.json.

    .venv/bin/python benchmarks/cluster.py"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from common import HERE, header, write_json, write_markdown

TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))
from cluster_scenario import EDGEKIT, loopback_up, wait_for_nodes  # noqa: E402

MODELS = "digits-mobilenet,mapping_models:se_resnet"
MATRIX = ["--target", "onnx,tflite,executorch", "--recipe", "fp32,int8", "--device", "cpu",
          "--no-profile", "--rounds", "6"]  # fmt: skip
SPEEDUP_TARGET, OVERHEAD_TARGET = 1.6, 0.5


def run(command: list[str], env: dict, cpus: str | None = None) -> subprocess.CompletedProcess:
    pinned = ["taskset", "-c", cpus, *command] if cpus else command
    done = subprocess.run(pinned, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(pinned)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def results_of(done: subprocess.CompletedProcess) -> dict:
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    return json.loads((run_dir / "results.json").read_text())


def overlaps(rows: list[dict]) -> int:
    """Pairs of distinct benchmark windows on one node that overlap."""
    windows: dict[str, set] = {}
    for row in rows:
        if row.get("bench_started"):
            windows.setdefault(row["node"], set()).add(
                (row["bench_started"], row["bench_finished"])
            )
    count = 0
    for spans in windows.values():
        ordered = sorted((datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in spans)
        count += sum(end > start for (_, end), (start, _) in itertools.pairwise(ordered))
    return count


def overhead_per_cell(results: dict) -> float:
    """The export phase's wall time beyond the busiest node's own export time, per cell of
    that node: queueing, shipping the model and the file, landing it."""
    phases = results["run"]["phases"]
    busy: dict[str, list[float]] = {}
    for cell in phases["exports"]:
        busy.setdefault(cell["node"], []).append(cell["seconds"])
    node = max(busy, key=lambda n: sum(busy[n]))
    return (phases["export_s"] - sum(busy[node])) / len(busy[node])


def compare_rows(local: dict, clustered: dict) -> list[dict]:
    def key(row: dict) -> tuple:
        return (row["model"], row["target"], row["recipe"], row["device"], row["threads"])

    mine = {key(r): r for r in clustered["rows"] if r["status"] == "ok"}
    compared = []
    for row in local["rows"]:
        other = mine.get(key(row))
        if row["status"] != "ok" or other is None or not row.get("rounds_ms"):
            continue
        low = max(min(row["rounds_ms"]), min(other["rounds_ms"]))
        high = min(max(row["rounds_ms"]), max(other["rounds_ms"]))
        compared.append({
            "row": f"{row['model']} {row['target']}/{row['recipe']}",
            "local_p50": row["latency"]["p50_ms"], "cluster_p50": other["latency"]["p50_ms"],
            "ratio": other["latency"]["p50_ms"] / row["latency"]["p50_ms"],
            "rounds_overlap": low <= high,  # the two runs' round p50s share a range
        })  # fmt: skip
    return compared


def inside(out: Path) -> dict:
    loopback_up()
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RAY_USAGE_STATS_ENABLED": "0",
           "EDGEKIT_CLUSTER_DIR": str(out / "state")}  # fmt: skip
    config = out / "edgekit.toml"
    config.write_text(f'[run]\nmodel = "{MODELS}"\ndata = "digits"\n'
                      '[run.data_for]\n"mapping_models:se_resnet" = "synthetic:64"\n')  # fmt: skip
    common = ["--config", str(config), *MATRIX, "--runs-dir", str(out / "runs"), "--history",
              str(out / "h.sqlite"), "--json"]  # fmt: skip
    local = results_of(run([EDGEKIT, "run", *common], env, cpus="0"))
    port = "6391"
    address = f"127.0.0.1:{port}"
    try:
        run([EDGEKIT, "cluster", "start", "--head", "--port", port, "--num-cpus", "1"], env, "0")
        run([EDGEKIT, "cluster", "join", address, "--num-cpus", "1"], env, "1")
        wait_for_nodes(address, 2, env)
        clustered = results_of(run([EDGEKIT, "run", "--cluster", address, *common], env))
    finally:
        run([EDGEKIT, "cluster", "stop"], env)
    return {
        "local": {"export_s": local["run"]["phases"]["export_s"],
                  "exports": local["run"]["phases"]["exports"]},
        "cluster": {"export_s": clustered["run"]["phases"]["export_s"],
                    "exports": clustered["run"]["phases"]["exports"]},
        "speedup": local["run"]["phases"]["export_s"] / clustered["run"]["phases"]["export_s"],
        "overhead_per_cell_s": overhead_per_cell(clustered),
        "overlapping_windows": overlaps(clustered["rows"]),
        "rows": compare_rows(local, clustered),
    }  # fmt: skip


def table(result: dict) -> list[str]:
    nodes = sorted({cell["node"] for cell in result["cluster"]["exports"]})
    lines = [
        "| measure | local (1 core) | cluster (2 nodes x 1 core) | target |",
        "|---|---|---|---|",
        f"| export phase | {result['local']['export_s']:.1f} s | "
        f"{result['cluster']['export_s']:.1f} s ({result['speedup']:.2f}x) | >= "
        f"{SPEEDUP_TARGET}x: {'met' if result['speedup'] >= SPEEDUP_TARGET else 'NOT met'} |",
        f"| scheduling overhead per export cell | | {result['overhead_per_cell_s']:.2f} s | < "
        f"{OVERHEAD_TARGET} s: "
        f"{'met' if result['overhead_per_cell_s'] < OVERHEAD_TARGET else 'NOT met'} |",
        f"| overlapping benchmark windows on a node | | {result['overlapping_windows']} | 0 |",
        "",
        "Export cells per node: "
        + ", ".join(
            f"{node} {sum(c['node'] == node for c in result['cluster']['exports'])}"
            for node in nodes
        ),
        "",
        "| row | local p50 ms | cluster p50 ms | ratio | round ranges overlap |",
        "|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(f"| {row['row']} | {row['local_p50']:.3f} | {row['cluster_p50']:.3f} | "
                     f"{row['ratio']:.2f} | {'yes' if row['rounds_overlap'] else 'no'} |")  # fmt: skip
    return lines


def main() -> None:
    if "--inside" in sys.argv:
        out = Path(sys.argv[sys.argv.index("--inside") + 1])
        write_json(out / "result.json", inside(out))
        return
    if shutil.which("unshare") is None or shutil.which("taskset") is None:
        raise SystemExit("benchmarks/cluster.py needs unshare and taskset (util-linux)")
    with tempfile.TemporaryDirectory(prefix="ek-cluster-") as tmp:
        subprocess.run(["unshare", "-n", sys.executable, __file__, "--inside", tmp], check=True)
        result = json.loads((Path(tmp) / "result.json").read_text())
    write_json(HERE / "cluster.json", result)
    lines = header("A two-node loopback cluster against one machine", "python "
                   "benchmarks/cluster.py", [
        f"- matrix: {MODELS} x onnx, tflite, executorch x fp32, int8 on cpu (12 exports, 2 "
        "device pools); CPU sets by taskset: the local run and the head on CPU 0, the second node on "
        "CPU 1; the host-CPU pools run on the head",
    ])  # fmt: skip
    write_markdown(HERE / "CLUSTER.md", [*lines, *table(result)])
    print("wrote benchmarks/CLUSTER.md")


if __name__ == "__main__":
    main()
