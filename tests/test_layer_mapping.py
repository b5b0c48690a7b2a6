"""Every compute layer of a model maps to its ops in each artifact, by the module path
quantize-debug prints (``b2.dw``): the one mapping (:mod:`edgekit.targets.layermap`) that
quantize-debug's cross-check, ``export --keep-float`` and per-layer profiling share.

Models from outside the zoo, as a user writes them (``tests/mapping_models.py``: residual blocks
with squeeze-excite and a conv and its BatchNorm as two attributes, a small vision transformer,
channel shuffle with upsampling), and the zoo's digits-mobilenet. What legitimately maps to no
op is asserted with the reason edgekit states: ``nn.MultiheadAttention`` calls its ``out_proj``
weights in its own forward, so the op carries ``blocks.1.attn.mha`` wherever the file names ops
by the module that ran (litert-torch's op scopes; a .pte's module stacks, once PT2E freezes the
weights under new names). ONNX still maps it, by its weight's state-dict name."""

from __future__ import annotations

import json
from itertools import product

import pytest
from cli_helpers import run_cli

from edgekit.quantize.layers import find_layers
from edgekit.targets import get_target
from edgekit.targets.layermap import map_layers
from edgekit.targets.manifest import Manifest

SE, VIT, SHUFFLE = (
    "mapping_models:se_resnet",
    "mapping_models:tiny_vit",
    "mapping_models:shuffle_upsample",
)
ARCHITECTURES = (SE, VIT, SHUFFLE, "digits-mobilenet")
TARGETS = ("onnx", "tflite", "executorch")
RECIPES = ("fp32", "int8")
CALIBRATION = ("--calibration-samples", "16")  # XNNPACK's histogram observers are slow

OUT_PROJ = "blocks.1.attn.mha.out_proj"


def _never_runs(target: str) -> str:
    return (
        f"its forward never runs: blocks.1.attn.mha uses its weights in its own forward, and "
        f"the {target} file names those ops blocks.1.attn.mha"
    )


# (model, target, recipe) -> {layer: the reason stated}; every other layer maps
UNMAPPED = {
    (VIT, "tflite", "fp32"): {OUT_PROJ: _never_runs("tflite")},
    (VIT, "tflite", "int8"): {OUT_PROJ: _never_runs("tflite")},
    # fp32 maps it by the weight's parameter name; PT2E freezes weights as _frozen_paramN
    (VIT, "executorch", "int8"): {OUT_PROJ: _never_runs("executorch")},
}


def data_for(spec: str) -> str:
    return "digits" if spec == "digits-mobilenet" else "synthetic:64"


@pytest.fixture(scope="module")
def sources():
    from edgekit.sources.load import load_model

    cache: dict = {}

    def source(spec: str):
        if spec not in cache:
            cache[spec] = load_model(spec, quiet=True)
        return cache[spec]

    return source


@pytest.fixture(scope="module")
def exported(sources, tmp_path_factory, export_digits):
    """``exported(spec, target, recipe)`` -> Artifact, made once per module; the default model
    comes from the session's store (the mapping is structural: calibration 200 or 16 give the
    same int8 ops)."""
    from edgekit.export.pipeline import export_artifact
    from edgekit.sources.data import load_dataset

    out_dir = tmp_path_factory.mktemp("mapped")
    cache: dict = {}

    def export(spec: str, target: str, recipe: str):
        key = (spec, target, recipe)
        if spec == "digits-mobilenet":
            return export_digits(target, recipe)
        if key not in cache:
            source = sources(spec)
            data = load_dataset(data_for(spec), source.preprocess)
            result = export_artifact(
                source,
                data,
                target,
                recipe,
                out_dir=out_dir / spec.replace(":", "-"),
                calibration_samples=16,
                validation_samples=50,
            )
            cache[key] = result.artifact
        return cache[key]

    return export


@pytest.mark.parametrize(
    ("spec", "target", "recipe"), list(product(ARCHITECTURES, TARGETS, RECIPES))
)
def test_every_compute_layer_maps_to_its_ops(sources, exported, spec, target, recipe):
    artifact = exported(spec, target, recipe)
    census = get_target(target).census(artifact.path, artifact.manifest)
    layers = [layer.name for layer in find_layers(sources(spec).module)]

    mapping = map_layers(layers, census)

    expected = UNMAPPED.get((spec, target, recipe), {})
    assert mapping.reasons == expected
    for layer in layers:
        kinds = [census.ops[index].kind for index in mapping.ops[layer]]
        assert (layer in expected) != ("mac" in kinds), (layer, kinds)  # its conv or matmul
    if recipe == "int8":  # the mapping names the op that really runs the layer in int8
        computes = {census.ops[i].compute for layer in layers for i in mapping.ops[layer]
                    if census.ops[i].kind == "mac"}  # fmt: skip
        assert computes == {"int8"}


def test_a_pte_without_its_manifest_says_it_keeps_no_module_paths(exported):
    artifact = exported(SE, "executorch", "int8")
    census = get_target("executorch").census(artifact.path)  # the file alone

    mapping = map_layers(["b2.dw", "head"], census)

    assert mapping.reasons == dict.fromkeys(
        ["b2.dw", "head"], "the executorch file keeps no module paths"
    )
    assert any("edgekit's manifest records them at export" in note for note in census.notes)


def test_onnx_legacy_exporter_names_map_too(sources, tmp_path):
    import torch

    from edgekit.targets.onnx.convert import without_graph_dumps

    source = sources(SE)
    path = tmp_path / "legacy.onnx"
    with without_graph_dumps():  # nodes named by scope: /b2/dw/dw.0/Conv
        torch.onnx.export(source.module, (torch.from_numpy(source.example_input()),), str(path),
                          dynamo=False, opset_version=17)  # fmt: skip

    mapping = map_layers([layer.name for layer in find_layers(source.module)],
                         get_target("onnx").census(path))  # fmt: skip

    assert mapping.reasons == {}


def quantize_debug(capsys, spec: str, *extra: str) -> dict:
    result = run_cli(capsys, "quantize-debug", "--model", spec, "--data", data_for(spec),
                     "--samples", "16", "--json", *extra)  # fmt: skip
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_quantize_debug_cross_checks_every_layer_of_the_se_model_on_onnx(capsys):
    report = quantize_debug(capsys, SE, "--target", "onnx")

    figures = {row["name"]: row["artifact_db"] for row in report["layers"]}
    assert len(figures) == 19 and all(db is not None for db in figures.values()), figures
    assert report["notes"] == []  # nothing unmapped


@pytest.mark.parametrize("target", ["tflite", "executorch"])
def test_quantize_debug_says_which_layer_has_no_figure_and_why(capsys, target):
    report = quantize_debug(capsys, VIT, "--target", target)

    missing = [row["name"] for row in report["layers"] if row["artifact_db"] is None]
    assert missing == [OUT_PROJ]
    assert f"{target}: no figure for {OUT_PROJ}: {_never_runs(target)}" in report["notes"]


def test_keep_float_takes_the_paths_quantize_debug_printed_on_every_target(capsys, tmp_path):
    report = quantize_debug(capsys, SE)
    islands = {row["name"]: row["float_island"] for row in report["layers"]}
    # a conv and its BatchNorm as two attributes, and a Linear whose ReLU is F.relu in the
    # enclosing block: both fused into the layer by every target
    kept = [*islands["b2.conv1"], *islands["b1.se.fc1"]]
    assert kept == ["b2.conv1", "b2.dw", "b1.se.fc1", "b1.se.fc2"]

    for target in TARGETS:
        result = run_cli(capsys, "export", "--model", SE, "--data", "synthetic:64", "--target",
                         target, "--int8", "--keep-float", ",".join(kept), *CALIBRATION, "-o",
                         str(tmp_path / target), "--json")  # fmt: skip

        assert result.code == 0, (target, result.err)
        manifest = json.loads(result.out)["artifacts"][0]
        assert manifest["keep_float"] == kept
        # the file itself: exactly the kept layers' convs and linears compute in float
        census = get_target(target).census(
            tmp_path / target / manifest["file"]["name"], Manifest(manifest)
        )
        mapping = map_layers([*kept, "b2.project", "head"], census)
        compute = {layer: {census.ops[i].compute for i in ops if census.ops[i].kind == "mac"}
                   for layer, ops in mapping.ops.items()}  # fmt: skip
        expected = {**{layer: {"fp32"} for layer in kept}, "b2.project": {"int8"}, "head": {"int8"}}
        assert compute == expected, target
        assert not [w for w in manifest["warnings"] if w.startswith("audit")], target


@pytest.mark.parametrize("target", ["tflite", "executorch"])
def test_keep_float_refuses_a_layer_no_op_carries_with_the_reason(capsys, target, tmp_path):
    result = run_cli(capsys, "export", "--model", VIT, "--data", "synthetic:64", "--target",
                     target, "--int8", "--keep-float", OUT_PROJ, *CALIBRATION, "-o",
                     str(tmp_path))  # fmt: skip

    assert result.code == 2, result.err
    assert f"cannot keep {OUT_PROJ} float: its forward never runs" in " ".join(result.err.split())
