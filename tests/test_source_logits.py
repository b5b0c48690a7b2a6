"""The source's logits, once per process for the same weights and inputs: what changes them
runs the forward pass again, and what a caller does to its copy stays with the caller."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from cli_helpers import run_cli

from edgekit.sources.logits import SourceLogits, weights_key
from edgekit.sources.preprocess import Preprocess
from edgekit.sources.source import SourceModel


def counted(memo: SourceLogits, source, x: np.ndarray, passes: list) -> np.ndarray:
    return memo(source, x, lambda images: passes.append(len(images)) or source._forward(images))


@pytest.fixture
def source() -> SourceModel:
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 3),
    ).eval()  # fmt: skip
    preprocess = Preprocess((8, 8), 1, (0.0,), (1.0,), ("a", "b", "c"))
    return SourceModel("tiny", "torch", module, preprocess, digest="d0", spec="tiny")


@pytest.fixture
def images() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((5, 1, 8, 8)).astype(np.float32)


def test_the_same_weights_and_images_run_once(source, images):
    memo, passes = SourceLogits(), []
    first = counted(memo, source, images, passes)
    again = counted(memo, source, images.copy(), passes)  # equal bytes, another array
    assert passes == [5]
    np.testing.assert_array_equal(first, again)
    counted(memo, source, images[:3], passes)
    assert passes == [5, 3]


def test_weights_changed_in_place_run_again_and_give_their_own_logits(source, images):
    memo, passes = SourceLogits(), []
    before = counted(memo, source, images, passes)
    with torch.no_grad():
        source.module[3].bias.add_(1.0)
    after = counted(memo, source, images, passes)
    assert passes == [5, 5]
    np.testing.assert_allclose(after, before + 1.0, rtol=1e-5, atol=1e-5)
    source.module[1].running_mean.fill_(0.5)  # a buffer, not a parameter
    counted(memo, source, images, passes)
    assert passes == [5, 5, 5]


class Offset(torch.nn.Module):
    """A non-persistent buffer: in no state dict, yet in the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(3), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :3] + self.offset


def test_a_buffer_outside_the_state_dict_is_part_of_the_key(source, images):
    offset = Offset().eval()
    source.module = torch.nn.Sequential(source.module, offset).eval()
    memo, passes = SourceLogits(), []
    counted(memo, source, images, passes)
    offset.offset.fill_(2.0)
    counted(memo, source, images, passes)
    assert passes == [5, 5]


def test_weights_it_cannot_read_run_every_time(source):
    source.module = torch.nn.Linear(2, 2, device="meta").eval()
    assert weights_key(source) is None


def test_a_caller_changing_its_copy_does_not_change_the_next_callers(source, images):
    memo, passes = SourceLogits(), []
    computed = counted(memo, source, images, passes)
    expected = computed.copy()
    computed[:] = 0  # the array of the caller that computed it
    counted(memo, source, images, passes)[:] = 0  # a remembered one
    np.testing.assert_array_equal(counted(memo, source, images, passes), expected)
    assert passes == [5]


def test_a_hooked_or_training_module_runs_every_time(source, images):
    memo, passes = SourceLogits(), []
    seen = []
    handle = source.module[0].register_forward_hook(lambda *_: seen.append(1))
    counted(memo, source, images, passes)
    counted(memo, source, images, passes)
    assert passes == [5, 5] and len(seen) == 2  # the hook saw both passes
    handle.remove()
    source.module.train()
    assert weights_key(source) is None
    source.module.eval()
    assert weights_key(source) is not None


def test_another_thread_count_runs_again(source, images):
    memo, passes = SourceLogits(), []
    before = torch.get_num_threads()
    try:
        counted(memo, source, images, passes)
        torch.set_num_threads(1 if before != 1 else 2)
        counted(memo, source, images, passes)
    finally:
        torch.set_num_threads(before)
    assert passes == [5, 5]


def test_the_least_recently_used_images_go_first_beyond_the_bytes():
    passes = []
    source = SimpleNamespace(framework="onnx", digest="d", max_batch=256)

    def compute(x):
        passes.append(int(x[0, 0]))
        return np.zeros((1, 2), np.float32)  # 8 bytes: two fit in 16

    memo = SourceLogits(max_bytes=16)
    for value in (1, 2, 1, 3, 2, 1):
        memo(source, np.full((1, 1), value, np.float32), compute)
    assert passes == [1, 2, 3, 2, 1]  # 1 was used again before 3 came, so 2 went first
    assert len(memo) == 2


def test_predict_goes_through_the_process_memo(source, images, source_forward_passes):
    np.testing.assert_array_equal(source.predict(images), source.predict(images))
    assert source_forward_passes == [5]


def test_an_export_validates_every_recipe_against_one_forward_pass(
    capsys, tmp_path, source_forward_passes
):
    """``edgekit export --recipe fp32,fp16``: both files are checked against the source's
    logits on the same 200 images, which the source computes once."""
    result = run_cli(capsys, "export", "--target", "onnx", "--recipe", "fp32,fp16", "-o",
                     str(tmp_path), "--json")  # fmt: skip
    assert result.code == 0, result.err
    manifests = json.loads(result.out)["artifacts"]
    assert [(m["recipe"], m["validation"]["passed"]) for m in manifests] == [
        ("fp32", True),
        ("fp16", True),
    ]
    assert source_forward_passes == [200]
