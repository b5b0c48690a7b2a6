"""Loading source models: the zoo, a user's factory (+ state dict), a .pt2 and a .keras file,
and every way such input can be wrong."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from edgekit.errors import UserInputError
from edgekit.sources.load import load_model
from edgekit.sources.zoo import ZOO


def test_the_default_classifier_is_accurate_on_the_evaluation_split(digits_model, digits_data):
    split = digits_data.evaluation
    top1 = np.mean(digits_model.predict(split.x).argmax(1) == split.y)
    assert top1 >= 0.97
    assert digits_model.preprocess.input_shape() == (1, 1, 32, 32)
    assert digits_model.spec == "zoo:digits-mobilenet"


def test_zoo_latency_models_have_the_reference_architectures():
    from edgekit.sources.architectures import count_macs

    mobilenet = ZOO["mobilenet_v2"].build().eval()
    resnet = ZOO["resnet50"].build().eval()
    example = torch.zeros(1, 3, 224, 224)
    # torchvision's published figures: 3.50 M / 300.8 M MACs and 25.56 M / 4.09 G MACs
    assert sum(p.numel() for p in mobilenet.parameters()) == 3_504_872
    assert count_macs(mobilenet, example) == pytest.approx(300.8e6, rel=0.01)
    assert sum(p.numel() for p in resnet.parameters()) == 25_557_032
    assert count_macs(resnet, example) == pytest.approx(4.09e9, rel=0.01)


def test_zoo_prefix_is_accepted(digits_model):
    assert load_model("zoo:digits-mobilenet", quiet=True).digest == digits_model.digest


def test_user_factory_with_a_state_dict(tmp_path):
    from user_models import tiny_cnn

    trained = tiny_cnn()
    with torch.no_grad():
        trained.fc.bias.fill_(3.0)
    weights = tmp_path / "tiny.pt"
    torch.save(trained.state_dict(), weights)
    model = load_model("user_models:tiny_cnn", weights=weights)
    assert model.framework == "torch"
    assert model.preprocess.class_names[3] == "3"
    assert torch.equal(model.module.fc.bias, torch.full((10,), 3.0))
    assert model.predict(model.example_input(4)).shape == (4, 10)


def test_user_factory_without_a_declared_shape_needs_input_shape():
    with pytest.raises(UserInputError, match="--input-shape"):
        load_model("user_models:no_shape")


def test_exported_program_file(tmp_path):
    from user_models import tiny_cnn

    module = tiny_cnn().eval()
    path = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 32, 32),)), path)
    model = load_model(str(path))
    x = model.example_input(3)
    expected = module(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-5, atol=1e-5)
    assert model.preprocess.num_classes == 10


def test_keras_file(tmp_path):
    import keras

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(5)(keras.layers.GlobalAveragePooling2D()(x))
    path = tmp_path / "small.keras"
    keras.Model(inputs, outputs).save(path)
    model = load_model(str(path))
    assert (model.framework, model.preprocess.layout) == ("keras", "NHWC")
    assert model.preprocess.input_shape() == (1, 3, 16, 16)
    assert model.predict(model.example_input(2)).shape == (2, 5)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("missing/model.pt2", "model file not found"),
        ("missing/model.keras", "model file not found"),
        ("user_models:raises", "the factory raised RuntimeError: weights server unreachable"),
        ("user_models:not_a_module", "returned str, not nn.Module"),
        ("no_such_package.models:build", "cannot import the factory"),
        ("zoo:alexnet", "no such zoo model"),
        ("alexnet", "not a zoo model, a file, or package.module:factory"),
    ],
)
def test_bad_model_specs_say_what_is_wrong(spec, message):
    with pytest.raises(UserInputError, match=message) as error:
        load_model(spec)
    assert spec.split(":")[0].split("/")[0] in str(error.value)


def test_unreadable_model_files(tmp_path):
    garbage = tmp_path / "broken.pt2"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(UserInputError, match=r"broken.pt2: not a loadable ExportedProgram"):
        load_model(str(garbage))
    keras_garbage = tmp_path / "broken.keras"
    keras_garbage.write_text("{}")
    with pytest.raises(UserInputError, match=r"broken.keras: not a loadable Keras model"):
        load_model(str(keras_garbage))


def test_a_state_dict_that_does_not_fit(tmp_path):
    path = tmp_path / "other.pt"
    torch.save(torch.nn.Linear(3, 3).state_dict(), path)
    with pytest.raises(UserInputError, match=r"other.pt: state dict does not fit the model"):
        load_model("user_models:tiny_cnn", weights=path)


class RunsCode:
    def __reduce__(self):
        return (print, ("this would have run on load",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as handle:
        pickle.dump({"weight": RunsCode()}, handle)
    with pytest.raises(UserInputError, match=r"evil.pt: refused to load: .* run code"):
        load_model("user_models:tiny_cnn", weights=path)
    assert "this would have run" not in capsys.readouterr().out
