"""The contract every registered target meets, built in or a plugin's: the tests run over the
registry (``target_names()``) with the TorchScript plugin of tests/plugins/ registered, so a
target added to edgekit, or written by a user, is held to the same checks as the three that
ship. Each role a target declares answers with its type; each it lacks is refused in the words
of ``edgekit.targets.base.ROLES``, never with an AttributeError or a half answer."""

from __future__ import annotations

import numpy as np
import pytest
from target_helpers import plugin_target_registered, registered_targets

from edgekit.targets import get_target, target_names
from edgekit.targets.base import (
    ROLES,
    Census,
    FileFacts,
    OfficialRunner,
    OpTimes,
    PlannedMemory,
)
from edgekit.targets.census import COMPUTE_DTYPES, KINDS

TARGETS = registered_targets()


@pytest.fixture
def exported(request, export_digits):
    """The target's fp32 export of the built-in classifier, with the plugin registered."""
    with plugin_target_registered():
        yield get_target(request.param), export_digits(request.param, "fp32")


def test_the_registry_holds_the_plugin_beside_the_built_in_targets():
    assert {"tflite", "executorch", "onnx", "torchscript"} <= set(TARGETS)
    assert "torchscript" not in target_names()  # gone again outside the context


@pytest.mark.parametrize("exported", TARGETS, indirect=True)
def test_a_session_stages_invokes_and_reads_out_what_the_source_computes(
    exported, digits_model, digits_data
):
    target, artifact = exported
    x = digits_data.evaluation.x[:1]
    session = target.open(artifact.path, artifact.manifest, threads=1)
    logits = session.output(session.invoke(session.stage(x)))
    expected = digits_model.predict(x)
    assert logits.shape == expected.shape and logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, atol=1e-3 * np.abs(expected).max())


@pytest.mark.parametrize("exported", TARGETS, indirect=True)
def test_coverage_counts_stay_within_the_graph(exported):
    target, artifact = exported
    coverage = target.coverage(artifact.path, artifact.manifest)
    assert coverage.total_ops > 0 and 0 <= coverage.fast_ops <= coverage.total_ops
    assert coverage.transposes >= 0 and all(isinstance(op, str) for op in coverage.fallback_ops)
    if coverage.compute_ops is not None:
        assert 0 <= (coverage.int8_ops or 0) <= coverage.compute_ops <= coverage.total_ops


@pytest.mark.parametrize("exported", TARGETS, indirect=True)
def test_a_census_counts_every_op_once_in_the_known_kinds(exported):
    target, artifact = exported
    if not target.has_role("census"):
        with pytest.raises(NotImplementedError, match=f"{target.name}: {ROLES['census']}"):
            target.census(artifact.path, artifact.manifest)
        return
    census = target.census(artifact.path, artifact.manifest)
    assert isinstance(census, Census) and census.target == target.name and census.ops
    assert [op.index for op in census.ops] == sorted({op.index for op in census.ops})
    assert {op.kind for op in census.ops} <= set(KINDS)
    assert {op.compute for op in census.ops} <= set(COMPUTE_DTYPES)
    assert sum(op.macs for op in census.ops) > 0  # a classifier multiplies and adds
    assert census.inputs and census.outputs


@pytest.mark.parametrize("exported", TARGETS, indirect=True)
def test_each_role_answers_with_its_type_or_is_refused_in_its_words(exported):
    target, artifact = exported
    answers = {
        "describe": (lambda: target.describe(artifact.path), FileFacts),
        "profile": (lambda: target.profile(artifact.path, artifact.manifest, 1, 2, 1), OpTimes),
        "official_runner": (target.official_runner, OfficialRunner),
        "planned_memory": (lambda: target.planned_memory(artifact.path), PlannedMemory),
    }
    for role, (call, kind) in answers.items():
        if target.has_role(role):
            assert isinstance(call(), kind), role
        elif role == "official_runner":
            assert call() is None
        elif role == "planned_memory":
            memory = call()
            assert memory.bytes is None and ROLES[role] in memory.source
        else:
            with pytest.raises(NotImplementedError, match=f"{target.name}: {ROLES[role]}"):
                call()
    # layer_errors needs a quantized export to mean anything: its presence is the contract here
    assert target.has_role("layer_errors") == ("layer_errors" in target.roles)


@pytest.mark.parametrize("name", TARGETS)
def test_a_declared_role_is_a_function_of_its_module(name):
    with plugin_target_registered():
        target = get_target(name)
        assert set(target.roles) <= set(ROLES)
        for role in target.roles:  # imported without running it: a typo in a module fails here
            assert callable(target.role_function(role)), role
