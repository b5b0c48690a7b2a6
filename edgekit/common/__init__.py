"""Helpers every stage uses, each importing only ``edgekit.errors`` and the standard library
(numpy and scipy for the statistics): files written atomically (``fileio``), schema checks,
statistics and metrics, the machine's fingerprint, the cache folder, installed versions, the
plugin loader and the native libraries' log filters (``quiet``).

Kept empty of imports: the arm64 guest copies some of these files into a tree of empty
``__init__`` files and runs them as they are."""
