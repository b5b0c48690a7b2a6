"""How well the interleaved latency gate (``edgekit check CANDIDATE --against BASELINE
--max-latency-regression 10``) tells noise from a regression, measured: an artifact against
itself, 20 times on a quiet machine and 20 times with a busy process on one core beside it, and
a candidate 15 % slower (the same file with a calibrated busy wait after each invoke), 20 times.
Writes benchmarks/GATES.md and benchmarks/gates.json.

    .venv/bin/python benchmarks/gate.py [--trials 20] [--model mobilenet_v2]"""

from __future__ import annotations

import argparse

from common import HERE, artifacts, busy_core, header, write_json, write_markdown

from edgekit.measure.bench import bench_artifact
from edgekit.measure.gates import latency_regression
from edgekit.worker.latency import LatencyProtocol, NoiseGuard

THRESHOLD = 10.0  # percent
SLOWER = 0.15
PROTOCOL = LatencyProtocol(warmup=10, min_runs=50, min_seconds=1.0, rounds=15, block_seconds=0.1)
GUARD = NoiseGuard(enabled=False)  # the gate must hold without waiting for a quiet machine


def trials(artifact, count: int, delay_ms: float | None, busy: bool, log) -> list[dict]:
    found = []
    for index in range(count):
        hog = busy_core(0) if busy else None
        try:
            gate = latency_regression(
                artifact,
                artifact,
                THRESHOLD,
                device="cpu",
                threads=1,
                protocol=PROTOCOL,
                guard=GUARD,
                synthetic_delay_ms=delay_ms,
            )
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        found.append({"passed": gate.passed, **gate.figures})
        low, high = gate.figures["ratio_ci"]
        log(
            f"  trial {index + 1}: ratio {gate.figures['ratio']:.3f} [{low:.3f}, {high:.3f}] "
            f"over {gate.figures['rounds']} rounds {'PASS' if gate.passed else 'FAIL'}"
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--model", default="mobilenet_v2")
    args = parser.parse_args()
    log = lambda message: print(message, flush=True)  # noqa: E731
    made, _, _ = artifacts(args.model, log)
    artifact = next(a for a in made if a.label == "tflite/fp32")
    p50 = bench_artifact(artifact, device="cpu", threads=1, protocol=PROTOCOL).stats["p50_ms"]
    delay = SLOWER * p50
    conditions = {
        "self against self, quiet": trials(artifact, args.trials, None, False, log),
        "self against self, a busy process on one core": trials(
            artifact, args.trials, None, True, log
        ),
        f"candidate {100 * SLOWER:.0f} % slower": trials(artifact, args.trials, delay, False, log),
    }
    write_json(HERE / "gates.json", {"p50_ms": p50, "delay_ms": delay, "conditions": conditions})
    lines = header(
        "The latency gate's power",
        "python benchmarks/gate.py",
        [
            f"- artifact: {args.model} {artifact.label}, 1 thread, p50 {p50:.3f} ms; the slower "
            f"candidate adds a busy wait of {delay:.3f} ms ({100 * SLOWER:.0f} % of that p50) after "
            "each invoke",
            f"- gate: pass when the whole 95 % interval of candidate/reference is at or below "
            f"{1 + THRESHOLD / 100:.2f} ({PROTOCOL.rounds} interleaved rounds in "
            f"{PROTOCOL.sessions} sessions, sessions added while the interval straddles the "
            f"threshold, within {PROTOCOL.budget_s:g} s; the noise guard off, so the busy process "
            "is not waited out)",
        ],
    )
    lines += [
        "| condition | gate passed | ratio (median of trials) | widest 95% interval | "
        "rounds (median, max) | target |",
        "|---|---|---|---|---|---|",
    ]
    targets = [f"passes {args.trials} of {args.trials}"] * 2 + [f"caught in >= {args.trials - 1}"]
    for (name, found), target in zip(conditions.items(), targets, strict=True):
        ratios = sorted(t["ratio"] for t in found)
        widest = max(found, key=lambda t: t["ratio_ci"][1] - t["ratio_ci"][0])["ratio_ci"]
        passed = sum(t["passed"] for t in found)
        rounds = sorted(t["rounds"] for t in found)
        lines.append(
            f"| {name} | {passed} / {len(found)} | {ratios[len(ratios) // 2]:.3f} | "
            f"[{widest[0]:.3f}, {widest[1]:.3f}] | {rounds[len(rounds) // 2]}, {rounds[-1]} | "
            f"{target} |"
        )
    write_markdown(HERE / "GATES.md", lines)
    print("wrote benchmarks/GATES.md")


if __name__ == "__main__":
    main()
