"""Training of the zoo's digits classifier is deterministic and cached by content digest."""

from __future__ import annotations

from edgekit.models import torch_digest
from edgekit.training import TrainingRecipe, cache_key, train_module
from edgekit.zoo import ZOO


def test_training_twice_gives_the_same_weights():
    entry = ZOO["digits-mobilenet"]
    short = TrainingRecipe(epochs=1)
    assert torch_digest(train_module(entry, short)) == torch_digest(train_module(entry, short))
    other_seed = TrainingRecipe(epochs=1, seed=1)
    assert torch_digest(train_module(entry, other_seed)) != torch_digest(train_module(entry, short))


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
    real_train = training._train
    monkeypatch.setattr(training, "_train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    recipe = TrainingRecipe(epochs=1)
    first = training.trained_state_dict(ZOO["digits-mobilenet"], recipe, quiet=True)
    second = training.trained_state_dict(ZOO["digits-mobilenet"], recipe, quiet=True)
    assert len(calls) == 1
    assert list(tmp_path.glob("digits-mobilenet-*.pt"))
    assert all((first[k] == second[k]).all() for k in first)
