"""Model files: edgekit's own (``Artifact`` and its manifest),
other tools' (``foreign``: a ``.tflite``/``.pte``/``.onnx`` edgekit did not make, described as
it is) and what any such file really holds (``audit``). Imports the targets, never a device."""
