"""The torch module path of every edge-dialect node, by debug handle, recorded at export time.

A .pte keeps debug handles (each XNNPACK node's ``debug_handle`` field in the delegate payload;
each instruction's handles in the emitter's map, which ``to_executorch`` returns but does not
write) and no module paths: those live in ``node.meta["nn_module_stack"]`` until the program is
serialized. The export stores both maps in the manifest's ``details`` and the census reads them
back (``module_of_handles``)."""

from __future__ import annotations

from typing import Any

from edgekit.targets.census import clean_module_path

MAC_TARGETS = ("aten.convolution", "aten.linear", "aten.addmm", "aten.mm")
NO_HANDLE = 65535  # XNNPACK's DEFAULT_DEBUG_HANDLE: a node the delegate added (a transpose)


def handle_modules(edge: Any, strip: str = "") -> dict[str, str]:
    """debug handle -> module path of each node of an EdgeProgramManager's ``forward``, inside
    the XNNPACK delegates too (``strip``: a wrapper's prefix, ``inner.`` for fp16)."""
    from executorch.exir.lowered_backend_module import get_lowered_backend_modules

    program = edge.exported_program()
    programs = [program] + [
        lowered.original_module for lowered in get_lowered_backend_modules(program.graph_module)
    ]
    found: dict[str, str] = {}
    for each in programs:
        parameters = dict(each.graph_signature.inputs_to_parameters)
        for node in each.graph_module.graph.nodes:
            handle = node.meta.get("debug_handle")
            if node.op != "call_function" or not isinstance(handle, int):
                continue
            # quantize/dequantize nodes share their op's handle and have no module stack: the
            # conv or linear decides, else the first node with a module
            module, key = node_module(node, parameters, strip), str(handle)
            if module and (not found.get(key) or _is_mac(node)):
                found[key] = module
            found.setdefault(key, module)
    return found


def node_module(node: Any, parameters: dict[str, str], strip: str = "") -> str:
    """A node's module: the innermost of its module stack, or for a conv or linear the module
    that owns its weight where that lies inside the stack (a module that calls another's
    weights in its own forward, nn.MultiheadAttention's out_proj, is the stack's last)."""
    stack = node.meta.get("nn_module_stack") or {}
    scope = clean_module_path(list(stack.values())[-1][0]) if stack else ""
    if _is_mac(node) and len(node.args) > 1:
        weight = node.args[1]
        owner = parameters.get(getattr(weight, "name", ""), "").rpartition(".")[0]
        if owner and (not scope or owner.startswith(scope + ".")):
            scope = owner
    return scope.removeprefix(strip) if strip and scope.startswith(strip) else scope


def _is_mac(node: Any) -> bool:
    return any(name in str(node.target) for name in MAC_TARGETS)


def instruction_handles(program: Any) -> dict[str, list[int]]:
    """instruction index -> debug handles of the ``forward`` plan (an ExecutorchProgramManager's
    ``debug_handle_map``: one handle per kernel call, every delegated node's for a delegate)."""
    handles = (getattr(program, "debug_handle_map", None) or {}).get("forward", {})
    return {str(k): [v] if isinstance(v, int) else list(v) for k, v in handles.items()}


def module_of_handles(handles: list[int], modules: dict[str, str]) -> str | None:
    """The module of the first of ``handles`` the manifest knows (None: none, or the root)."""
    for handle in handles:
        module = modules.get(str(handle))
        if module is not None and handle != NO_HANDLE:
            return module or None
    return None
