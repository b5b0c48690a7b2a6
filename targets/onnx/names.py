"""Which torch module an ONNX node comes from: the dynamo exporter's ``name_scopes`` metadata."""

from __future__ import annotations

import ast
from typing import Any

NAME_SCOPES = "pkg.torch.onnx.name_scopes"


def module_path(node: Any) -> str:
    """The torch module a dynamo-exported node comes from: name_scopes ['', 'a', 'a.b', 'op']."""
    for prop in node.metadata_props:
        if prop.key == NAME_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return ""
            return str(scopes[-2]) if len(scopes) >= 2 else ""
    return ""
