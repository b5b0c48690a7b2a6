"""ExecuTorch's per-layer int8 error: torchao's PT2E numeric debugger on the XNNPACK-quantized
graph (what the .pte holds; a delegated .pte cannot be probed per op)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.common.quiet import quiet_python
from edgekit.targets.base import LayerErrors
from edgekit.targets.census import clean_module_path
from edgekit.targets.layermap import layer_errors_of

if TYPE_CHECKING:
    from edgekit.sources.source import SourceModel

TOOL = "torchao PT2E numeric debugger (XNNPACKQuantizer)"
PT2E_SAMPLES = 16  # calibration for the cross-check (its observers are slow)


def layer_errors(source: SourceModel, x: np.ndarray, names: list[str], work: Path) -> LayerErrors:
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e import (
        compare_results,
        extract_results_from_loggers,
        prepare_for_propagation_comparison,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgekit.quantize.pt2e import with_runtime_rules

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True)
    )
    with quiet_python(messages=(".*",)):
        program = torch.export.export(
            fold_batch_norms(source.module), (torch.from_numpy(source.example_input()),)
        )
        # both graphs must come from the same ExportedProgram: matching uses from_node ancestry
        prepared = prepare_pt2e(program.module(), with_runtime_rules(quantizer))
        with torch.no_grad():
            # XNNPACK's histogram observers cost ~10 ms per op per sample: a ranking needs few
            for sample in x[:PT2E_SAMPLES]:
                prepared(torch.from_numpy(sample[None]))
        converted = convert_pt2e(prepared)
        reference = prepare_for_propagation_comparison(program.module())
        actual = prepare_for_propagation_comparison(converted)
        with torch.no_grad():
            for sample in x[: PT2E_SAMPLES // 2]:
                batch = torch.from_numpy(sample[None])
                reference(batch)
                actual(batch)
        results = compare_results(
            extract_results_from_loggers(reference), extract_results_from_loggers(actual)
        )
    modules = [_module(summary.ref_module_stack) for summary in results.values()]
    figures = [
        (module, float(torch.stack([r.sqnr for r in summary.results]).mean()))
        for summary, module in zip(results.values(), modules, strict=True)
    ]
    return layer_errors_of(figures, names, modules, target="executorch", tool=TOOL)


def _module(stack: object) -> str | None:
    """The module path torchao gives a compared node ("{}" for a node with no module stack)."""
    path = clean_module_path(str(stack))
    return None if not path or path.startswith("{") else path


def fold_batch_norms(module: Any) -> Any:
    """A copy with each conv + BatchNorm of a Sequential folded into the conv. prepare_pt2e folds
    them in the quantized graph only, so the float graph's conv output (before its BatchNorm)
    would be compared with the quantized one's (after it), and the BatchNorm has no partner."""
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = copy.deepcopy(module).eval()
    for unit in folded.modules():
        if (
            isinstance(unit, torch.nn.Sequential)
            and len(unit) > 1
            and isinstance(unit[0], torch.nn.Conv2d)
            and isinstance(unit[1], torch.nn.BatchNorm2d)
        ):
            unit[0] = fuse_conv_bn_eval(unit[0], unit[1])
            unit[1] = torch.nn.Identity()
    return folded
