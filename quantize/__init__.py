"""Quantization that does not belong to one target: the recipes (``recipes``: fp32, fp16, int8,
int8-dynamic, what each promises), calibration data (``calibration``), PT2E int8 for the torch
exporters (``pt2e``), which layers a recipe touches (``layers``) and per-layer sensitivity for
the accuracy-aware loop (``sensitivity``). Imports sources' types and common only; the targets
import it."""
