"""A user's model that needs a module from another folder on the driver's PYTHONPATH
(../elsewhere): edgekit ships this module's folder only, so the nodes cannot import it and
the rows say which node and what to copy there."""

from driver_only_helper import tiny_cnn  # noqa: F401 (the factory: driver_only_broken:tiny_cnn)
