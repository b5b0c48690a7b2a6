"""A module on the driver's PYTHONPATH but outside the model's folder: not shipped."""

from driver_only_net import tiny_cnn  # noqa: F401
