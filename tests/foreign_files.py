"""Model files made by the runtimes' own tools, as users bring them: TFLiteConverter on a Keras
model (float, dynamic range, full integer with int8 I/O, fp16), ``torch.onnx.export``, plain
ExecuTorch ``to_edge_transform_and_lower``, and files that installed packages ship."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ONNX_ZOO = "onnx/backend/test/data/light"  # the ONNX model zoo's files, shipped by onnx


def shipped(package: str, relative: str) -> Path:
    """A file an installed package ships (nothing is downloaded)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    return Path(spec.origin).parent / relative


def light_model(name: str) -> Path:
    return shipped("onnx", f"{ONNX_ZOO.removeprefix('onnx/')}/{name}.onnx")


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return (bunch.images / 16.0).astype(np.float32)[..., None], bunch.target


def keras_digits() -> object:
    """A small Keras CNN trained for a few seconds on digits (8x8, NHWC, inputs in [0, 1]);
    wide enough (32 channels) that dynamic-range quantization takes its convolutions."""
    import keras

    x, y = digits_arrays()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])  # fmt: skip
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", loss)
    model.fit(x, y, epochs=15, batch_size=32, verbose=0)
    return model


def tflite_files(model: object, folder: Path) -> dict[str, Path]:
    """TFLiteConverter's four usual outputs of one Keras model."""
    import tensorflow as tf

    x, _ = digits_arrays()

    def representative():
        for index in range(100):
            yield [x[index : index + 1]]

    def convert(name: str, configure=None) -> Path:
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if configure:
            configure(converter)
        path = folder / name
        path.write_bytes(converter.convert())
        return path

    def dynamic(c):
        c.optimizations = [tf.lite.Optimize.DEFAULT]

    def fp16(c):
        dynamic(c)
        c.target_spec.supported_types = [tf.float16]

    def full_integer(c):
        dynamic(c)
        c.representative_dataset = representative
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8

    return {
        "fp32": convert("keras-fp32.tflite"),
        "dynamic": convert("keras-dynamic.tflite", dynamic),
        "fp16": convert("keras-fp16.tflite", fp16),
        "int8": convert("keras-int8-io.tflite", full_integer),
    }


def tflite_with_a_fallback_op(folder: Path) -> Path:
    """A float model ending in CUMSUM, an op XNNPACK does not take (LiteRT's builtin kernels
    run it): what --require-full-delegation must catch."""
    import tensorflow as tf

    weights = tf.constant(np.random.default_rng(0).standard_normal((3, 3, 1, 8)), tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 1], tf.float32)])
    def forward(image):
        features = tf.nn.relu(tf.nn.conv2d(image, weights, 1, "SAME"))
        return tf.math.cumsum(tf.reshape(features, [1, -1])[:, :10], axis=1)

    converter = tf.lite.TFLiteConverter.from_concrete_functions([forward.get_concrete_function()])
    path = folder / "cumsum.tflite"
    path.write_bytes(converter.convert())
    return path


def torch_onnx(module: object, example: np.ndarray, path: Path, dynamo: bool = True) -> Path:
    """``torch.onnx.export`` as a user calls it (no edgekit)."""
    import torch

    torch.onnx.export(
        module, (torch.from_numpy(example),), str(path), dynamo=dynamo,
        input_names=["pixels"], output_names=["scores"], external_data=False,
    )  # fmt: skip
    return path


def executorch_pte(module: object, example: np.ndarray, path: Path, xnnpack: bool = True) -> Path:
    """ExecuTorch's own recipe: torch.export, to_edge_transform_and_lower, to_executorch."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    partitioners = []
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    program = torch.export.export(module.eval(), (torch.from_numpy(example),))
    lowered = to_edge_transform_and_lower(program, partitioner=partitioners)
    path.write_bytes(lowered.to_executorch().buffer)
    return path
