"""Type checks for what users and earlier runs hand edgekit (configs, manifests, results): a
value of the wrong type is one line naming the file and the field, never a traceback later."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from edgekit.errors import UserInputError

R = typing.TypeVar("R")
_UNIONS = (typing.Union, types.UnionType)


def record_spec(record: type) -> dict[str, Any]:
    """The fields a record's ``to_dict`` writes, with their types: the dataclass's fields and
    its properties (``Coverage.int8_fraction``), read from their annotations. results.json is
    checked against this, so no table of the same fields is kept by hand."""
    spec = dict(typing.get_type_hints(record))
    for name, member in vars(record).items():
        if isinstance(member, property) and member.fget is not None:
            spec[name] = typing.get_type_hints(member.fget)["return"]
    return spec


def required_fields(record: type) -> tuple[str, ...]:
    """A record's fields without a default: what its object must hold."""
    return tuple(
        f.name
        for f in dataclasses.fields(record)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


def matches(value: object, kind: Any) -> bool:
    """Does ``value`` (parsed JSON/TOML) fit the annotation ``kind``? A dataclass is an object
    whose keys have their fields' types (``list[LayerTime]``: a list of such objects)."""
    if kind is Any:
        return True
    if dataclasses.is_dataclass(kind):  # its object: every field without a default present
        spec, required = record_spec(kind), required_fields(kind)
        return (
            isinstance(value, dict)
            and all(key in value for key in required)
            and all(matches(item, spec[key]) for key, item in value.items() if key in spec)
        )
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in _UNIONS:
        return any(matches(value, arg) for arg in args)
    if kind is type(None) or kind is None:
        return value is None
    if origin is list:
        return isinstance(value, list) and all(matches(item, args[0]) for item in value)
    if origin is tuple:
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(args)
            and all(matches(item, arg) for item, arg in zip(value, args, strict=True))
        )
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and matches(v, args[1]) for k, v in value.items()
        )
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, kind)


def record_from(record: type[R], payload: dict[str, Any]) -> R:
    """The record a checked JSON object holds. A field typed as a record (or a list of them) is
    built too and a tuple field made a tuple; a key the record does not have (a derived figure,
    ``Coverage.fast_fraction``) is dropped; a field that a file written before it existed lacks
    is None. The one way from results.json, a manifest or a worker's answer to a record."""
    hints = typing.get_type_hints(record)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(record):
        if not spec.init:
            continue
        if spec.name not in payload:
            if spec.name in required_fields(record):
                values[spec.name] = None
            continue
        value, kind = payload[spec.name], hints[spec.name]
        inner, many = record_in(kind)
        if inner is not None and isinstance(value, list if many else dict):
            value = [_built(inner, item) for item in value] if many else record_from(inner, value)
        elif isinstance(value, list) and _is_tuple(kind):
            value = tuple(value)
        values[spec.name] = value
    return record(**values)


def json_of(record: object) -> dict[str, Any]:
    """A record as a results file keeps it (its ``to_dict`` where it has one), nested records
    too. A field ``record_from`` set to None because the file it was read from predates it is
    left out again, so that what was read is written back as it was, and reads again."""
    to_dict = getattr(record, "to_dict", None)
    payload = to_dict() if callable(to_dict) else dataclasses.asdict(record)  # type: ignore[call-overload]
    hints = typing.get_type_hints(type(record))
    for spec in dataclasses.fields(record):  # type: ignore[arg-type]
        value, kind = getattr(record, spec.name), hints[spec.name]
        inner, many = record_in(kind)
        if value is None:
            if not matches(None, kind):
                payload.pop(spec.name, None)
        elif inner is not None:
            payload[spec.name] = [json_of(item) for item in value] if many else json_of(value)
    return payload


def _built(record: type[R], item: object) -> object:
    return record_from(record, item) if isinstance(item, dict) else item


def _is_tuple(kind: Any) -> bool:
    return any(typing.get_origin(option) is tuple for option in _options(kind))


def _options(kind: Any) -> tuple[Any, ...]:
    """The types a field may hold: a union's members, or the one type."""
    return typing.get_args(kind) if typing.get_origin(kind) in _UNIONS else (kind,)


def type_name(kind: object) -> str:
    return str(kind).replace("typing.", "").replace("<class '", "").replace("'>", "")


def check_fields(
    payload: object, spec: dict[str, Any], where: str, required: tuple[str, ...] = ()
) -> None:
    """Every key of ``spec`` present in ``payload`` has its type; ``required`` keys exist.
    A nested dict spec checks a nested object; a field typed as a record (or a list of them)
    is checked field by field against the record, so a fault deep inside is named where it is
    (``steps[2].top1``), not as the whole record's type."""
    if not isinstance(payload, dict):
        raise UserInputError(f"{where}: must be an object, got {type(payload).__name__}")
    for key in required:
        if key not in payload:
            raise UserInputError(f"{where}: lacks '{key}'")
    for key, kind in spec.items():
        if key not in payload:
            continue
        value, place = payload[key], f"{where}.{key}"
        record, many = record_in(kind)
        if isinstance(kind, dict):
            if value is not None:
                check_fields(value, kind, place)
        elif record is not None and value is not None and isinstance(value, list if many else dict):
            for at, item in enumerate(value) if many else [(None, value)]:
                inner = place if at is None else f"{place}[{at}]"
                check_fields(item, record_spec(record), inner, required_fields(record))
        elif not matches(value, kind):
            raise UserInputError(f"{place}: must be {type_name(kind)}, got {value!r:.60}")


def record_in(kind: Any) -> tuple[type | None, bool]:
    """The record a field holds, and whether a list of them: ``Step | None`` gives (Step,
    False), ``list[Step]`` (Step, True); (None, False) for any other type."""
    for option in _options(kind):
        if dataclasses.is_dataclass(option):
            return option, False
        if typing.get_origin(option) is list and dataclasses.is_dataclass(
            typing.get_args(option)[0]
        ):
            return typing.get_args(option)[0], True
    return None, False
