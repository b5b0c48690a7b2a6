"""A float graph made safe for onnxruntime's static quantizer, before it runs: export's and
``edgekit culprit``'s block conversions both quantize through it. Imports only onnx: a repro
folder carries its source."""

from __future__ import annotations

from pathlib import Path


def own_biases(model_path: Path, work: Path) -> Path:
    """``model_path``, or a copy in ``work`` where each node has its own bias initializer.
    ``quantize_static`` copies a bias several nodes share under the name ``{name}{n}``, without
    looking at the graph's other names: torch.onnx's ``val_11`` copied for the 8th node becomes
    ``val_118``, an activation of the same graph (PoolFormer's GroupNorms share one bias), and
    it fails with "Quantization parameter shared mode is not supported for weight yet". Copies
    made here take names no tensor has."""
    import onnx

    model = onnx.load(str(model_path))
    graph = model.graph
    floats = {i.name: i for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    readers: dict[str, list] = {}
    for node in graph.node:
        if len(node.input) > 2 and node.input[2] in floats:
            readers.setdefault(node.input[2], []).append(node)
    shared = {name: nodes for name, nodes in readers.items() if len(nodes) > 1}
    if not shared:
        return model_path
    taken = {name for node in graph.node for name in [*node.input, *node.output]} | set(floats)
    for name, nodes in shared.items():
        for count, node in enumerate(nodes[1:], start=1):
            copy_name = f"{name}.copy{count}"
            while copy_name in taken:
                copy_name += "_"
            taken.add(copy_name)
            copy = onnx.TensorProto()
            copy.CopyFrom(floats[name])
            copy.name = copy_name
            graph.initializer.append(copy)
            node.input[2] = copy_name
    unshared = work / "own_biases.onnx"
    onnx.save(model, str(unshared))
    return unshared
