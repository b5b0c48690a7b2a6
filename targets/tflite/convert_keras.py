"""Keras source (NHWC already) -> .tflite through ``tf.lite.TFLiteConverter``.

``from_saved_model`` on a SavedModel exported with a batch-1 input signature and
``training=False``: ``from_keras_model`` would keep a dynamic batch dimension;
``from_concrete_functions`` keeps resource variables (VAR_HANDLE/READ_VARIABLE) and can't be
calibrated."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.targets.base import ExportRequest
from edgekit.targets.tflite.converted import Converted, version


class KerasConverter:
    def __init__(self, request: ExportRequest, scratch: Path):
        self.request = request
        self.scratch = scratch

    def run(self) -> Converted:
        import tensorflow as tf

        request = self.request
        converter = tf.lite.TFLiteConverter.from_saved_model(str(self._saved_model(tf)))
        quantizer = None
        if request.recipe != "fp32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if request.recipe == "int8":
            samples = np.ascontiguousarray(request.calibration.transpose(0, 2, 3, 1))
            converter.representative_dataset = lambda: ([sample[None]] for sample in samples)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            if request.io_dtype == "int8":
                converter.inference_input_type = tf.int8
                converter.inference_output_type = tf.int8
            quantizer = (
                "TFLiteConverter full-integer (representative_dataset of "
                f"{len(samples)} samples, TFLITE_BUILTINS_INT8)"
            )
        elif request.recipe == "int8-dynamic":
            quantizer = "TFLiteConverter dynamic range (Optimize.DEFAULT)"
        elif request.recipe == "fp16":
            converter.target_spec.supported_types = [tf.float16]
            quantizer = "TFLiteConverter float16 weights (supported_types=[float16])"
        result = self.scratch / "model.tflite"
        result.write_bytes(converter.convert())
        details = {
            "converter": f"tf.lite.TFLiteConverter (tensorflow {version('tensorflow-cpu')})",
            "channel_last_io": False,  # a Keras model is NHWC already
            "io_dtype": request.io_dtype,
            "quantizer": quantizer,
        }
        return Converted(result, "NHWC", details)

    def _saved_model(self, tf: Any) -> Path:
        """A SavedModel of ``model(x, training=False)`` with a batch-1 input signature."""
        import keras

        model = self.request.source.module
        height, width = self.request.source.preprocess.input_size
        channels = self.request.source.preprocess.channels
        archive = keras.export.ExportArchive()
        archive.track(model)
        archive.add_endpoint(
            "serve",
            functools.partial(model.__call__, training=False),
            [tf.TensorSpec([1, height, width, channels], tf.float32, name="input")],
        )
        directory = self.scratch / "saved_model"
        archive.write_out(str(directory), verbose=False)
        return directory
