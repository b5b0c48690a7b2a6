"""The op census of a .pte, read from the file itself: the execution plan's instructions in
order, each XNNPACK delegate call expanded into the nodes of its subgraph (decoded from the
delegate payload with the ``flatc`` that executorch ships), each portable kernel call as one op.
Dtypes, weights and MACs come from the XNNPACK values and the plan's tensor metadata. Module
paths come from the manifest edgekit wrote at export: the file keeps each XNNPACK node's
``debug_handle`` and the manifest which module each handle (and each instruction) came from
(``edgekit.targets.executorch.debug_handles``)."""

from __future__ import annotations

from math import prod
from pathlib import Path
from typing import Any

from edgekit.errors import UserInputError, first_line
from edgekit.targets.census import Census, CensusOp
from edgekit.targets.executorch.coverage import (
    XNN_INT8_ACTIVATIONS,
    XNNPACK_BACKEND,
    delegate_payload,
    xnnpack_graph,
)
from edgekit.targets.executorch.debug_handles import module_of_handles
from edgekit.targets.executorch.describe import describe
from edgekit.targets.manifest import Manifest
from edgekit.targets.round_trips import DEQUANTIZE, QUANTIZE, OpGraph, round_trips

XNN_MAC = {
    "XNNConv2d",
    "XNNDepthwiseConv2d",
    "XNNConvTranspose2d",
    "XNNFullyConnected",
    "XNNBatchMatrixMultiply",
}
XNN_DATA = {
    "XNNStaticTranspose",
    "XNNStaticReshape",
    "XNNStaticConstantPad",
    "XNNStaticSlice",
    "XNNCopy",
    "XNNConcatenate2",
    "XNNConcatenate3",
    "XNNConcatenate4",
    "XNNConcatenate5",
}
XNN_STATIC_INT8 = {"xnn_datatype_qint8", "xnn_datatype_quint8"}
XNN_DYNAMIC_INT8 = XNN_INT8_ACTIVATIONS - XNN_STATIC_INT8  # qdint8/qpint8: quantized at run time
XNN_FLOAT = {"xnn_datatype_fp32", "xnn_datatype_fp16", "xnn_datatype_bf16", "xnn_datatype_pfp32"}
XNN_WEIGHTS = {
    "xnn_datatype_qint8": "int8",
    "xnn_datatype_quint8": "int8",
    "xnn_datatype_qcint8": "int8",
    "xnn_datatype_qcint4": "int4",
    "xnn_datatype_qbint4": "int4",
    "xnn_datatype_fp16": "fp16",
    "xnn_datatype_bf16": "bf16",
    "xnn_datatype_fp32": "fp32",
}
GRANULARITY = {
    "PerChannelQuant": "per-channel",
    "PerTensorQuant": "per-tensor",
    "PerChannelGroupQuant": "per-group",
}
# portable kernels that only move data (operator names without namespace)
PORTABLE_DATA = {
    "view_copy",
    "permute_copy",
    "transpose_copy",
    "expand_copy",
    "slice_copy",
    "select_copy",
    "squeeze_copy",
    "unsqueeze_copy",
    "split_copy",
    "cat",
    "clone",
    "flip",
    "constant_pad_nd",
    "pixel_shuffle",
    "repeat",
    "unbind_copy",
    "stack",
    "split_with_sizes_copy",
    "alias_copy",
    "index_select",
    "gather",
}
PORTABLE_MAC = {"convolution", "linear", "addmm", "mm", "bmm", "matmul"}
PORTABLE_CASTS = {"_to_dim_order_copy", "_to_copy", "to_copy"}  # data when in/out dtypes match
SCALAR_WEIGHTS = {5: "fp16", 6: "fp32", 1: "int8", 0: "int8"}  # ExecuTorch ScalarType codes
HALF = 5

Key = tuple[Any, ...]  # ("v", plan value index) or ("x", delegate number, XNNPACK value id)


def census(path: Path, manifest: Manifest | None = None) -> Census:
    """Every op of ``path``'s ``forward`` method in execution order, with module paths where
    ``manifest`` (edgekit's, from the export) has them; UserInputError if the file is not a
    readable ExecuTorch program."""
    from edgekit.targets.executorch.convert import quiet_library_noise

    path = Path(path)
    quiet_library_noise()  # importing exir loads torchao, which logs its CUDA kernels missing
    facts = describe(path)  # loads it with the runtime: one-line UserInputError if it cannot
    try:
        from executorch.exir._serialize._program import deserialize_pte_binary

        program = deserialize_pte_binary(path.read_bytes()).program
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable .pte ({first_line(exc)})") from None
    plans = {plan.name: plan for plan in program.execution_plan}
    plan = plans.get("forward", program.execution_plan[0])
    details = {} if manifest is None else manifest.details
    walk = _Walk(program, plan, details.get("debug_handles"), details.get("instruction_handles"))
    walk.run()
    notes = [
        f"read from the .pte: method '{plan.name}', {walk.kernels} portable kernel call(s), "
        f"{walk.delegates} delegate call(s)"
        + ("; XNNPACK subgraphs decoded from the delegate payloads" if walk.delegates else ""),
        _module_note(walk),
        "MACs (batch 1): XNNPACK conv/fully-connected/bmm from their value dims and kernel "
        "fields; portable convolution/linear/addmm/mm/bmm from the plan's tensor sizes; other "
        "ops 0",
        *walk.notes,
    ]
    if len(plans) > 1:
        notes.append(f"other methods not counted: {', '.join(sorted(set(plans) - {plan.name}))}")
    found = {"delegate_calls": walk.delegates, "delegate_sources": walk.sources}
    return Census("executorch", walk.ops, facts.inputs, facts.outputs, _round_trips(walk), notes,
                  found)  # fmt: skip


class _Walk:
    """The ops in execution order, with the values each reads and writes (for qdq pairs)."""

    def __init__(
        self,
        program: Any,
        plan: Any,
        handles: dict[str, str] | None = None,
        instructions: dict[str, list[int]] | None = None,
    ) -> None:
        self.program, self.plan = program, plan
        self.handles, self.instructions = handles, instructions or {}
        self.ops: list[CensusOp] = []
        self.reads: list[list[Key]] = []
        self.writes: list[list[Key]] = []
        # QUANTIZE: float -> static int8, DEQUANTIZE: int8 -> float
        self.roles: list[str | None] = []
        self.notes: list[str] = []
        self.sources: list[str] = []  # how each delegate call was read
        self.kernels = self.delegates = 0
        self.inputs = {("v", index) for index in plan.inputs}

    def run(self) -> None:
        from executorch.exir.schema import DelegateCall, KernelCall

        for chain in self.plan.chains:
            for position, instruction in enumerate(chain.instructions):
                call = instruction.instr_args
                if isinstance(call, KernelCall):
                    self.kernel(call)
                    self.ops[-1].module = self.module(self.instructions.get(str(position), []))
                elif isinstance(call, DelegateCall):
                    self.delegate(call)

    def module(self, handles: list[int]) -> str | None:
        return module_of_handles(handles, self.handles) if self.handles else None

    def add(self, op: CensusOp, reads: list[Key], writes: list[Key], role: str | None) -> None:
        op.index = len(self.ops)
        self.ops.append(op)
        self.reads.append(reads)
        self.writes.append(writes)
        self.roles.append(role)

    def tensor(self, index: int) -> Any:
        from executorch.exir.schema import Tensor

        value = self.plan.values[index].val
        return value if isinstance(value, Tensor) else None

    def kernel(self, call: Any) -> None:
        from executorch.exir.schema import TensorList

        self.kernels += 1
        operator = self.plan.operators[call.op_index]
        name = f"{operator.name}.{operator.overload}" if operator.overload else operator.name
        base = operator.name.split("::")[-1]
        last = self.plan.values[call.args[-1]].val  # out variants take their result last
        outs = list(last.items) if isinstance(last, TensorList) else [call.args[-1]]
        ins = [i for i in call.args if i not in outs and self.tensor(i) is not None]
        out = self.tensor(outs[0]) if outs else None
        op = CensusOp(0, name, fast=False, where="portable kernels")
        role = None
        if "quantize" in base or "choose_qparams" in base:
            op.kind = "quant"
            role = DEQUANTIZE if "dequantize" in base else None
            role = QUANTIZE if base.startswith("quantize") else role
        elif base in PORTABLE_CASTS:
            source = self.tensor(ins[0]) if ins else None
            cast = source is not None and out is not None
            op.kind = "quant" if cast and source.scalar_type != out.scalar_type else "data"
        elif base in PORTABLE_DATA:
            op.kind = "data"
        else:
            op.kind = "mac" if base in PORTABLE_MAC else "elementwise"
            op.compute = "fp16" if out is not None and int(out.scalar_type) == HALF else "fp32"
        if op.kind == "mac" and out is not None:
            self.portable_mac(op, base, call.args, out)
        self.add(op, [("v", i) for i in ins], [("v", i) for i in outs], role)

    def portable_mac(self, op: CensusOp, base: str, args: list[int], out: Any) -> None:
        weight_arg = 1 if base in ("convolution", "linear") else 2 if base == "addmm" else None
        if base == "convolution":
            weight, source = self.tensor(args[1]), self.tensor(args[0])
            transposed = getattr(self.plan.values[args[6]].val, "bool_val", False)
            # weight [C_out, C_in/groups, kH, kW] (transposed: [C_in, C_out/groups, kH, kW])
            if weight is not None and source is not None:
                per_output = prod(weight.sizes[1:])
                op.macs = prod(source.sizes if transposed else out.sizes) * per_output
        else:
            left = self.tensor(args[1] if base == "addmm" else args[0])
            op.macs = prod(out.sizes) * left.sizes[-1] if left is not None and left.sizes else 0
        if weight_arg is None:
            return
        # weights: a constant, or the output of a dequantize kernel (int8 weights kept unfused),
        # maybe behind a data op (addmm reads its weight through a permute_copy)
        index = args[weight_arg]
        producer = self.producer(("v", index))
        while producer is not None and self.ops[producer].kind == "data" and self.reads[producer]:
            if self.ops[producer].fast:  # a delegate output: not a portable weight chain
                break
            index = self.reads[producer][0][1]
            producer = self.producer(("v", index))
        if producer is not None and self.roles[producer] == DEQUANTIZE:
            op.weights = "int8"
            op.granularity = (
                "per-channel" if "per_channel" in self.ops[producer].op else "per-tensor"
            )
        elif (weight := self.tensor(index)) is not None and weight.data_buffer_idx:
            op.weights = SCALAR_WEIGHTS.get(int(weight.scalar_type))

    def producer(self, key: Key) -> int | None:
        return next((i for i in range(len(self.ops) - 1, -1, -1) if key in self.writes[i]), None)

    def delegate(self, call: Any) -> None:
        self.delegates += 1
        number = self.delegates - 1
        delegate = self.plan.delegates[call.delegate_index]
        graph = None
        if delegate.id == XNNPACK_BACKEND:
            payload = delegate_payload(self.program, delegate)
            graph = xnnpack_graph(payload)
        self.sources.append(f"{delegate.id} " + ("payload not decoded" if graph is None else
                                                 "subgraph decoded from the file"))  # fmt: skip
        if graph is None:
            self.notes.append(f"delegate {number} ({delegate.id}): payload not decoded, one op")
            op = CensusOp(0, delegate.id, f"delegate{number}", where=delegate.id)
            self.add(op, [("v", i) for i in call.args], [], None)
            return
        values: dict[int, tuple[dict[str, Any], str | None]] = {}
        for value in graph.get("xvalues", []):
            union = value["xvalue_union"]
            quant = union.get("quant_params_type") if "tensor_value" in union else None
            tensor = union.get("tensor_value", union)  # quantized values wrap the tensor value
            values[tensor["id_out"]] = (tensor, quant)
        # the delegate call's arguments are the subgraph's external inputs, then its outputs
        externals = list(graph.get("input_ids", [])) + list(graph.get("output_ids", []))
        outside = (
            dict(zip(externals, call.args, strict=True)) if len(externals) == len(call.args) else {}
        )

        def key(xid: int) -> Key:
            return ("v", outside[xid]) if xid in outside else ("x", number, xid)

        start = len(self.ops)
        for position, node in enumerate(graph.get("xnodes", [])):
            op, role = _xnn_op(node, values)
            op.name = f"delegate{number}/{position}"
            op.module = self.module([node["debug_handle"]] if "debug_handle" in node else [])
            fields = node["xnode_union"]
            reads = [key(fields[name]) for name in _xnn_inputs(node["xnode_union_type"], fields)]
            writes = [
                key(v) for k, v in fields.items() if k.startswith("output") and k[-3:] == "_id"
            ]
            self.add(op, reads, writes, role)
        new = self.ops[start:]
        fp32_filters = sum(1 for op in new if op.compute == "fp16" and op.weights == "fp32")
        if fp32_filters:
            self.notes.append(
                f"delegate {number}: {fp32_filters} fp16 node(s) keep fp32 filters in the file; "
                "XNNPACK converts them to fp16 when it packs them"
            )


def _module_note(walk: _Walk) -> str:
    if walk.handles is None:
        return (
            "module: None for every op: a .pte keeps no torch module paths (edgekit's manifest "
            "records them at export, by debug handle; none was given)"
        )
    named = sum(op.module is not None for op in walk.ops if op.kind == "mac")
    macs = sum(op.kind == "mac" for op in walk.ops)
    return (
        f"module paths from the manifest's debug handles (recorded at export): {named} of "
        f"{macs} conv/matmul ops"
    )


def _xnn_inputs(kind: str, fields: dict[str, Any]) -> list[str]:
    """The input fields of a node; a concatenation's unused slots default to id 0."""
    if kind.startswith("XNNConcatenate"):
        return [f"input{k}_id" for k in range(1, int(kind[-1]) + 1)]
    return [k for k in fields if k.endswith("_id") and not k.startswith("output")]


def _xnn_op(node: dict[str, Any], values: dict[int, Any]) -> tuple[CensusOp, str | None]:
    kind, fields = node["xnode_union_type"], node["xnode_union"]
    op = CensusOp(0, kind, fast=True, where="XNNPACK")
    source = values.get(fields.get("input1_id", fields.get("input_id")), ({}, None))[0]
    target = values.get(fields.get("output_id"), ({}, None))[0]
    datatype = source.get("datatype", "")
    if kind == "XNNConvert":
        op.kind = "quant"
        into = target.get("datatype", "")
        if datatype in XNN_STATIC_INT8 and into in XNN_FLOAT:
            return op, DEQUANTIZE
        return op, QUANTIZE if datatype in XNN_FLOAT and into in XNN_STATIC_INT8 else None
    if kind in XNN_DATA:
        op.kind = "data"
        return op, None
    op.kind = "mac" if kind in XNN_MAC else "elementwise"
    op.dynamic = datatype in XNN_DYNAMIC_INT8
    op.compute = (
        "int8" if datatype in XNN_INT8_ACTIVATIONS else "fp16" if "fp16" in datatype else "fp32"
    )
    if op.kind != "mac":
        return op, None
    filter_id = fields.get("filter_id", fields.get("input2_id"))
    weight, quant = values.get(filter_id, ({}, None))
    if weight.get("constant_buffer_idx"):  # a bmm of two activations has no weights
        op.weights = XNN_WEIGHTS.get(weight["datatype"], weight["datatype"])
        op.granularity = GRANULARITY.get(quant) if quant else None
    out_elements = prod(target.get("dims") or [0])
    if kind == "XNNConvTranspose2d":  # each input element feeds kH*kW*C_out/groups outputs
        kernel = fields["kernel_height"] * fields["kernel_width"]
        op.macs = prod(source.get("dims") or [0]) * kernel * fields["group_output_channels"]
    elif kind in ("XNNConv2d", "XNNDepthwiseConv2d"):  # group_input_channels is 1 for depthwise
        kernel = fields["kernel_height"] * fields["kernel_width"]
        op.macs = out_elements * kernel * fields["group_input_channels"]
    else:  # fully connected / bmm: one K-long dot product per output element
        op.macs = out_elements * ((source.get("dims") or [0])[-1])
    return op, None


def _round_trips(walk: _Walk) -> list[str]:
    """Round trips through float or int8 left in the executed graph, inside or between
    delegates (``edgekit.targets.round_trips``)."""

    def label(index: int) -> str:
        op = walk.ops[index]
        return f"#{index} {op.op}" + (" (portable)" if not op.fast else "")

    graph = OpGraph(walk.reads, walk.writes, walk.roles, frozenset(walk.inputs))
    return round_trips(graph, label)
