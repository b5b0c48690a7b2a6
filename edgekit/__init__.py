"""edgekit: export an image classifier to TFLite, ExecuTorch and ONNX, quantize it, and
measure latency and accuracy of every artifact against the server baseline."""

from edgekit.errors import EdgekitError, ExportRejected, UserInputError

__version__ = "0.1.0"
__all__ = ["EdgekitError", "ExportRejected", "UserInputError", "__version__"]
