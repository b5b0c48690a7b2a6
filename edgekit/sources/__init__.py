"""What a run starts from: a model spec to a ``SourceModel``
(``load``), its preprocessing (``preprocess``), labelled images (``data``), the built-in zoo,
its architectures, training and shipped weights, and Hugging Face models (``huggingface``).

``source``, ``preprocess`` and ``data`` are the types the targets and quantizers are handed:
they import only ``edgekit.common``. The rest of the package sits above the targets
(``load`` asks the onnx target to read an ``.onnx`` source). Kept empty of imports: re-exporting
``load_model`` here would make ``targets -> sources -> sources.load -> targets`` a cycle."""
