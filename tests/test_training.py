"""Training of the zoo's digits classifier is deterministic, CPU-independent and cached."""

from __future__ import annotations

import pytest

from edgekit.models import torch_digest
from edgekit.training import TrainingRecipe, cache_key, train_module
from edgekit.zoo import ZOO

SHORT = TrainingRecipe(epochs=1)
# What an AVX2-only machine (an AMD EPYC of this kind) gives the runtimes, simulated here by
# capping each library's instruction set; the other level is this machine's own (up to AMX).
AVX2_MACHINE = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}


def _has_avx512() -> bool:
    with open("/proc/cpuinfo") as handle:
        return " avx512f" in handle.read()


def test_training_twice_gives_the_same_weights():
    entry = ZOO["digits-mobilenet"]
    assert torch_digest(train_module(entry, SHORT)) == torch_digest(train_module(entry, SHORT))
    other_seed = TrainingRecipe(epochs=1, seed=1)
    assert torch_digest(train_module(entry, other_seed)) != torch_digest(train_module(entry, SHORT))


def test_weights_do_not_depend_on_the_cpus_instruction_set():
    entry = ZOO["digits-mobilenet"]
    here = torch_digest(train_module(entry, SHORT))
    avx2 = torch_digest(train_module(entry, SHORT, host_env=AVX2_MACHINE))
    assert here == avx2


@pytest.mark.skipif(not _has_avx512(), reason="needs a CPU with AVX-512 to show the difference")
def test_unpinned_training_would_depend_on_it():
    """Without the pinning the same two levels give other weights: the test above can fail."""
    entry = ZOO["digits-mobilenet"]
    here = torch_digest(train_module(entry, SHORT, pinned=False))
    avx2 = torch_digest(train_module(entry, SHORT, host_env=AVX2_MACHINE, pinned=False))
    assert here != avx2


def test_cache_key_changes_with_the_recipe_and_the_data():
    entry = ZOO["digits-mobilenet"]
    base = cache_key(entry, TrainingRecipe(), "data-a")
    assert base == cache_key(entry, TrainingRecipe(), "data-a")
    assert base != cache_key(entry, TrainingRecipe(epochs=2), "data-a")
    assert base != cache_key(entry, TrainingRecipe(), "data-b")


def test_second_use_loads_the_cached_weights(tmp_path, monkeypatch):
    import edgekit.training as training

    monkeypatch.setenv("EDGEKIT_CACHE", str(tmp_path))
    calls = []
    real_train = training.train_in_child
    monkeypatch.setattr(
        training, "train_in_child", lambda *a, **k: calls.append(1) or real_train(*a, **k)
    )
    first = training.trained_state_dict(ZOO["digits-mobilenet"], SHORT, quiet=True)
    second = training.trained_state_dict(ZOO["digits-mobilenet"], SHORT, quiet=True)
    assert len(calls) == 1
    assert list(tmp_path.glob("digits-mobilenet-*.pt"))
    assert all((first[k] == second[k]).all() for k in first)
