"""A runtime option ``edgekit tune`` searches (``Target.tuning_knobs``): its name as the
target's ``open`` takes it, the values worth trying (the first is edgekit's default), and, where
it only matters beside another option's value, which."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import UserInputError


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[Any, ...]
    why: str
    # the knob changes nothing unless these options have these values
    requires: Mapping[str, Any] = field(default_factory=dict)
    # options a value needs beside it (onnxruntime runs ORT_PARALLEL sequentially with one
    # inter-op thread): {value: {option: value}}
    companions: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)

    def candidate(self, options: Mapping[str, Any], value: Any) -> dict[str, Any]:
        """``options`` with this knob at ``value`` and the options that value needs."""
        return {**options, self.name: value, **self.companions.get(value, {})}

    @property
    def default(self) -> Any:
        return self.values[0]

    def applies(self, options: Mapping[str, Any]) -> bool:
        return all(options.get(name) == value for name, value in self.requires.items())


def defaults(knobs: tuple[Knob, ...]) -> dict[str, Any]:
    return {knob.name: knob.default for knob in knobs}


def checked_options(
    knobs: tuple[Knob, ...], options: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """``options`` over the knobs' defaults; a name no knob has, or a value of the wrong type,
    is one line naming ``where``."""
    by_name = {knob.name: knob for knob in knobs}
    chosen = defaults(knobs)
    for name, value in options.items():
        knob = by_name.get(name)
        if knob is None:
            known = ", ".join(by_name) or "none"
            raise UserInputError(f"{where}: unknown runtime option '{name}' (known: {known})")
        if not isinstance(value, type(knob.default)) or isinstance(value, bool) != isinstance(
            knob.default, bool
        ):
            raise UserInputError(
                f"{where}: runtime option {name}={value!r} is not a {type(knob.default).__name__}"
            )
        if value not in knob.values:  # the values tune tries are the ones edgekit opens
            raise UserInputError(
                f"{where}: runtime option {name}={value!r}: choose from "
                f"{', '.join(map(str, knob.values))}"
            )
        chosen[name] = value
    return chosen
