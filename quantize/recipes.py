"""Quantization recipes and the tolerances their exported artifacts are validated against."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.errors import UserInputError


@dataclass(frozen=True)
class Tolerance:
    """Export validation bounds: output SQNR against the source model, and top-1 agreement."""

    min_sqnr_db: float
    min_agreement: float


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    needs_calibration: bool
    tolerance: Tolerance


RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe(
            "fp32",
            "float32 weights and activations",
            needs_calibration=False,
            tolerance=Tolerance(40.0, 0.99),
        ),
        Recipe(
            "fp16",
            "float16 weights (activations fp32 or fp16 by runtime)",
            needs_calibration=False,
            tolerance=Tolerance(30.0, 0.98),
        ),
        Recipe(
            "int8",
            "static: int8 activations (calibrated) and per-channel int8 weights",
            needs_calibration=True,
            tolerance=Tolerance(12.0, 0.90),
        ),
        Recipe(
            "int8-dynamic",
            "int8 weights; activations quantized at run time",
            needs_calibration=False,
            tolerance=Tolerance(12.0, 0.90),
        ),
    )
}


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise UserInputError(f"unknown recipe '{name}' (choose from {', '.join(RECIPES)}, or all)")
    return RECIPES[name]


def parse_recipes(names: str) -> list[Recipe]:
    """``all``, one name, or a comma-separated list."""
    if names == "all":
        return list(RECIPES.values())
    return [get_recipe(name.strip()) for name in names.split(",") if name.strip()]
