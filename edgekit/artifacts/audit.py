"""``edgekit audit``: what a model file is, read from the file (any file, edgekit's or not),
against what it is said to be. Converters are known to give something else than what was
asked: an int8 model whose convolutions still compute in float, Q/DQ nodes missing around some
ops, a dynamic-range model taken for a static one. The audit reads the op census
(``edgekit.targets.census``) and states, per file: ops and share of MACs computed in int8,
fp16 and fp32; static or dynamic-range quantization; per-channel or per-tensor weights; the
float islands (by source module path where the file keeps it); I/O dtypes; quantize/dequantize
round trips; ops off the delegate or fast path. Each ``--expect``/``--expect-io``/
``--require-full-delegation`` that does not hold is one reason line (exit 1)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError
from edgekit.results import parse_io
from edgekit.targets import get_target, suffix_of, target_for_suffix, target_names
from edgekit.targets.census import Census, CensusOp

EXPECTATIONS = ("fp32", "fp16", "int8", "int8-dynamic")
FLOAT_IO = ("float32", "float16", "float64")
INT8_IO = ("int8", "uint8")


@dataclass
class Check:
    check: str  # expect int8, expect-io int8, full delegation
    passed: bool
    reasons: list[str] = field(default_factory=list)


@dataclass
class Audit:
    path: str
    target: str
    looks_like: str  # fp32, fp16, int8, int8-dynamic: what the MAC ops compute in
    quantization: str  # static, dynamic, static+dynamic, none
    ops: int
    kinds: dict[str, int]
    compute: dict[str, dict[str, float]]  # dtype -> {ops, macs, mac_share} over MAC ops
    weights: dict[str, int]  # "int8 per-channel" -> MAC ops
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    float_islands: list[dict[str, Any]]
    qdq_pairs: list[str]
    off_fast_path: dict[str, int]  # "OP (where)" -> count
    fast_ops: int
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the ops a dynamic-range expectation let stay float by the converter's own rule, said
    float_by_rule: str | None = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def reasons(self) -> list[str]:
        return [f"{self.path}: {r}" for c in self.checks if not c.passed for r in c.reasons]

    def to_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["passed"] = self.passed
        return payload

    def summary(self) -> dict[str, Any]:
        """What a manifest keeps of the audit (``edgekit audit FILE`` gives the whole)."""
        return {
            "looks_like": self.looks_like,
            "quantization": self.quantization,
            "compute": self.compute,
            "weights": self.weights,
            "float_islands": len(self.float_islands),
            "qdq_pairs": len(self.qdq_pairs),
            "fast_ops": self.fast_ops,
            "ops": self.ops,
            "passed": self.passed,
        }


def read_census(path: Path) -> Census:
    """The census of ``path`` by its suffix (one line naming the file when it is not a model)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: model file not found")
    name = target_for_suffix(path.suffix)
    if name is None:
        suffixes = ", ".join(suffix_of(t) for t in target_names())
        raise UserInputError(f"{path}: not a model file edgekit reads ({suffixes})")
    return get_target(name).census(path)


def audit_file(
    path: str | Path,
    expect: str | None = None,
    expect_io: str | None = None,
    *,
    require_full_delegation: bool = False,
    census: Census | None = None,
    kept_float: tuple[str, ...] = (),
) -> Audit:
    """Audit one file; ``expect*`` add the checks (none given: a description, always passing).
    ``kept_float`` names modules asked to stay float (``--keep-float``): not a reason."""
    if expect is not None and expect not in EXPECTATIONS:
        raise UserInputError(f"--expect {expect}: expected one of {', '.join(EXPECTATIONS)}")
    if expect_io is not None:
        expect_io = "float" if parse_io(expect_io, "--expect-io") == "float32" else "int8"
    census = census or read_census(Path(path))
    macs = [op for op in census.ops if op.kind == "mac"]
    report = Audit(
        path=str(path),
        target=census.target,
        looks_like=looks_like(census),
        quantization=_quantization(macs),
        ops=len(census.ops),
        kinds=dict(Counter(op.kind for op in census.ops)),
        compute=_compute_shares(macs),
        weights=dict(Counter(_weight_label(op) for op in macs if op.weights)),
        inputs=[spec.to_dict() for spec in census.inputs],
        outputs=[spec.to_dict() for spec in census.outputs],
        float_islands=float_islands(census) if looks_like(census) == "int8" else [],
        qdq_pairs=list(census.qdq_pairs),
        off_fast_path=dict(Counter(f"{op.op} ({op.where})" for op in census.ops if not op.fast)),
        fast_ops=sum(op.fast for op in census.ops),
        notes=list(census.notes),
    )
    if expect is not None:
        asked = [op for op in macs if not _kept(op, kept_float)]
        report.checks.append(_expect(expect, asked, report))
    if expect_io is not None:
        report.checks.append(_expect_io(expect_io, census))
    if require_full_delegation:
        report.checks.append(_full_delegation(census, report))
    return report


def looks_like(census: Census) -> str:
    """The recipe the MAC ops say: int8 (static) or int8-dynamic when most MACs compute in
    int8, fp16 when most have fp16 weights or compute, fp32 otherwise."""
    macs = [op for op in census.ops if op.kind == "mac"]
    weight = (lambda op: op.macs) if any(op.macs for op in macs) else (lambda op: 1)
    total = sum(weight(op) for op in macs) or 1
    int8 = [op for op in macs if op.compute == "int8"]
    if (
        int8
        and all(op.dynamic for op in int8)
        and all(op.float_by_rule for op in macs if op.compute in ("fp32", "fp16"))
    ):
        return "int8-dynamic"  # every float op is one the converter's own rule leaves float
    if sum(weight(op) for op in int8) / total >= 0.5:
        dynamic = sum(weight(op) for op in int8 if op.dynamic)
        return "int8-dynamic" if dynamic > sum(weight(op) for op in int8) / 2 else "int8"
    fp16 = sum(weight(op) for op in macs if "fp16" in (op.compute, op.weights))
    return "fp16" if fp16 / total >= 0.5 else "fp32"


def float_islands(census: Census) -> list[dict[str, Any]]:
    """Runs of consecutive compute ops (MAC or elementwise) that do not compute in int8, in a
    file that is mostly int8: each with its modules, op types and share of the MACs."""
    total = sum(op.macs for op in census.ops if op.kind == "mac") or 1
    islands: list[list[CensusOp]] = []
    current: list[CensusOp] = []
    for op in census.ops:
        if op.kind not in ("mac", "elementwise"):
            continue  # data movement and Q/DQ neither start nor end an island
        if op.compute in ("fp32", "fp16"):
            current.append(op)
        elif current:
            islands.append(current)
            current = []
    if current:
        islands.append(current)
    return [
        {
            "modules": list(dict.fromkeys(op.module or f"{op.op} #{op.index}" for op in island)),
            "ops": [op.op for op in island],
            "mac_ops": sum(op.kind == "mac" for op in island),
            "mac_share": sum(op.macs for op in island) / total,
        }
        for island in islands
    ]


def _kept(op: CensusOp, kept_float: tuple[str, ...]) -> bool:
    module = op.module or ""
    return any(module == path or module.startswith(path + ".") for path in kept_float)


def _quantization(macs: list[CensusOp]) -> str:
    kinds = {("dynamic" if op.dynamic else "static") for op in macs if op.compute == "int8"}
    return "+".join(sorted(kinds, reverse=True)) or "none"


def _compute_shares(macs: list[CensusOp]) -> dict[str, dict[str, float]]:
    total = sum(op.macs for op in macs)
    shares = {}
    for dtype in ("int8", "fp16", "fp32"):
        chosen = [op for op in macs if op.compute == dtype]
        count = sum(op.macs for op in chosen)
        shares[dtype] = {
            "ops": len(chosen),
            "macs": count,
            "mac_share": count / total if total else (len(chosen) / len(macs) if macs else 0.0),
        }
    return shares


def _weight_label(op: CensusOp) -> str:
    return f"{op.weights} {op.granularity}" if op.granularity else str(op.weights)


def _names(ops: list[CensusOp], limit: int = 6) -> str:
    names = list(dict.fromkeys(op.module or f"{op.op} #{op.index}" for op in ops))
    return ", ".join(names[:limit]) + (
        f" and {len(names) - limit} more" if len(names) > limit else ""
    )


def _share(ops: list[CensusOp], macs: list[CensusOp]) -> str:
    total = sum(op.macs for op in macs)
    return f"{100 * sum(op.macs for op in ops) / total:.1f} % of MACs" if total else "MACs unknown"


def _expect(expect: str, macs: list[CensusOp], report: Audit) -> Check:
    reasons = []
    if not macs:
        reasons.append("no convolution or matmul in the file: nothing to check the recipe on")
    floating = [op for op in macs if op.compute in ("fp32", "fp16")]
    static = [op for op in macs if op.compute == "int8" and not op.dynamic]
    dynamic = [op for op in macs if op.compute == "int8" and op.dynamic]
    if expect == "int8-dynamic" and dynamic:
        # judged by the converter's own rule, as the label is: what it leaves float on purpose
        # is said, not failed
        by_rule = [op for op in floating if op.float_by_rule]
        if by_rule:
            report.float_by_rule = (
                f"{len(by_rule)} of {len(macs)} conv/matmul ops ({_share(by_rule, macs)}): "
                f"{by_rule[0].float_by_rule}: {_names(by_rule)}"
            )
        floating = [op for op in floating if not op.float_by_rule]
    if expect in ("int8", "int8-dynamic"):
        if floating:
            reasons.append(
                f"{len(floating)} of {len(macs)} conv/matmul ops compute in float "
                f"({_share(floating, macs)}): {_names(floating)}"
            )
        if expect == "int8" and dynamic:
            reasons.append(
                f"{len(dynamic)} of {len(macs)} conv/matmul ops are dynamic-range (int8 weights, "
                f"activations quantized at run time), not static int8: {_names(dynamic)}"
            )
        if expect == "int8-dynamic" and static:
            reasons.append(
                f"{len(static)} of {len(macs)} conv/matmul ops are static int8 (int8 "
                f"activations from calibration), not dynamic-range: {_names(static)}"
            )
    else:
        int8 = static + dynamic
        if int8:
            reasons.append(
                f"{len(int8)} of {len(macs)} conv/matmul ops compute in int8 "
                f"({_share(int8, macs)}): {_names(int8)}"
            )
        half = [op for op in floating if "fp16" in (op.compute, op.weights)]
        other, have = (
            (half, "fp16")
            if expect == "fp32"
            else ([op for op in floating if op not in half], "fp32")
        )
        if other:
            reasons.append(
                f"{len(other)} of {len(macs)} conv/matmul ops have {have} weights or compute "
                f"({_share(other, macs)}): {_names(other)}"
            )
    return Check(f"expect {expect}", not reasons, reasons)


def _expect_io(expect_io: str, census: Census) -> Check:
    allowed = FLOAT_IO if expect_io == "float" else INT8_IO
    reasons = [
        f"{side} {spec.name or '#' + str(index)} is {spec.dtype}, expected {expect_io}"
        for side, specs in (("input", census.inputs), ("output", census.outputs))
        for index, spec in enumerate(specs)
        if spec.dtype not in allowed
    ]
    return Check(f"expect-io {expect_io}", not reasons, reasons)


def _full_delegation(census: Census, report: Audit) -> Check:
    outside = [op for op in census.ops if not op.fast]
    reasons = []
    if outside:
        kinds = ", ".join(f"{name} x{count}" for name, count in report.off_fast_path.items())
        reasons.append(
            f"{len(outside)} of {len(census.ops)} ops run outside the delegate / fast path: {kinds}"
        )
    return Check("full delegation", not reasons, reasons)
