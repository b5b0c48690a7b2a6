"""Options several commands share, and the parsers of their values."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from edgekit.devices import DEVICE_MODULES, device_names
from edgekit.errors import UserInputError

if TYPE_CHECKING:
    from edgekit.artifacts.foreign import ForeignOptions as ForeignFlags
    from edgekit.devices.base import Device

MODEL_HELP = (
    "zoo name, module:factory, .pt2, .keras, .onnx, or a Hugging Face save_pretrained folder"
)
DATA_HELP = "digits, synthetic[:N] (random images), a class-folder directory or .npz"
WEIGHTS_HELP = "state-dict file for a module:factory model"
# the one vocabulary of I/O dtypes (edgekit.results.parse_io), on export and audit alike
IO_HELP = "float or int8 inputs and outputs (float32 means float)"
ModelOption = Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)]
DataOption = Annotated[str, typer.Option("--data", "-d", help=DATA_HELP)]
WeightsOption = Annotated[Path | None, typer.Option("--weights", help=WEIGHTS_HELP)]
ShapeOption = Annotated[
    str | None, typer.Option("--input-shape", help="C,H,W when the model does not declare it")
]
ArtifactsArgument = Annotated[
    list[Path] | None, typer.Argument(help="artifact files (.tflite, .pte, .onnx)")
]

T = TypeVar("T")  # an option's value, under either of its names


def renamed(value: T | None, old_value: T | None, old: str, new: str) -> T | None:
    """An option's value under its name ``new`` or its old spelling ``old``: the old one still
    works, with one line saying so; both at once is bad input."""
    if old_value is None:
        return value
    if value is not None:
        raise UserInputError(f"{old} and {new} are one option: give {new} once")
    from edgekit.cli.console import err_console

    err_console.print(
        f"edgekit: {old} is now {new}; {old} goes in the next release", soft_wrap=True
    )
    return old_value


def choices(names: Callable[[], list[str]], built_in: Iterable[str]) -> str:
    """An option's help list: ``names()`` (plugins included), or the built-in names while a
    plugin does not import; the command itself then says which plugin, in one line."""
    try:
        return ", ".join(names())
    except UserInputError:
        return ", ".join(built_in)


DeviceOption = Annotated[str, typer.Option("--device", help=choices(device_names, DEVICE_MODULES))]
HistoryOption = Annotated[
    Path | None, typer.Option("--history", help="sqlite file (default ~/.edgekit/history.sqlite)")
]
CpuOption = Annotated[
    str | None,
    typer.Option(
        "--cpu",
        help="arm64-emu core: cortex-a76 (default), cortex-a53, cortex-a55, cortex-a710, "
        "neoverse-n1, neoverse-v1",
    ),
]
XnnpackOption = Annotated[
    bool | None,
    typer.Option("--xnnpack/--no-xnnpack", help=".tflite: XNNPACK (default) or builtin kernels"),
]
SerialOption = Annotated[str | None, typer.Option("--serial", help="adb serial (android)")]
TUNED = "tuned"
RuntimeOptionsOption = Annotated[
    str,
    typer.Option(
        "--runtime-options",
        help="tuned: the options edgekit tune wrote into the manifest; default: edgekit's own",
    ),
]
ThreadsOption = Annotated[str, typer.Option("--threads", help="thread counts, e.g. 1,2")]
RoundsOption = Annotated[
    int, typer.Option("--rounds", help="interleaved rounds, at least (each side one block each)")
]
SessionsOption = Annotated[
    int,
    typer.Option(
        "--sessions",
        help="sessions the rounds are split into, every side reopened between them; the "
        "intervals come from their spread (1: one session, intervals from the rounds)",
    ),
]
SessionGapOption = Annotated[
    float,
    typer.Option(
        "--session-gap",
        help="seconds to wait before each new session, so the sessions, and the intervals, "
        "span how the machine drifts over minutes (needs --sessions 2 or more)",
    ),
]
PrecisionOption = Annotated[
    str,
    typer.Option(
        "--precision",
        help="keep measuring until every interval the decision needs is within this much of "
        "its ratio, e.g. 5% (off: the planned sessions only)",
    ),
]
BudgetOption = Annotated[
    float,
    typer.Option(
        "--budget-s", help="seconds of measuring per pool at most (the precision's stopping rule)"
    ),
]
AcrossOption = Annotated[
    bool,
    typer.Option(
        "--across-machines", help="compare latency from different machine fingerprints, labelled"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]
# bench, tune and export --max-drop: time only while no other process keeps a core busy
NoiseGuardOption = Annotated[
    bool,
    typer.Option("--noise-guard/--no-noise-guard", help="time only while the machine is quiet"),
]


def parse_shape(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    try:
        channels, height, width = (int(part) for part in text.split(","))
    except ValueError:
        raise UserInputError(f"--input-shape '{text}': expected C,H,W such as 3,224,224") from None
    if min(channels, height, width) < 1:
        raise UserInputError(f"--input-shape '{text}': every dimension must be positive")
    return channels, height, width


def parse_threads(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UserInputError(f"--threads '{text}': expected positive counts such as 1 or 1,2")
    return values


def parse_precision(text: str) -> float | None:
    """``5%`` (or ``5``) -> 0.05: a percentage above 0 and below 100; ``off`` -> None."""
    if text.strip().lower() == "off":
        return None
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 100.0:
        raise UserInputError(
            f"--precision {text}: expected a percentage above 0 and below 100, such as 5%, or off"
        )
    return value / 100.0


def check_budget(seconds: float) -> float:
    if not seconds > 0.0:
        raise UserInputError(f"--budget-s {seconds:g}: expected seconds above 0")
    return seconds


def parse_csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def device_options(
    serial: str | None = None, cpu: str | None = None, xnnpack: bool | None = None
) -> dict[str, object]:
    """The device options a command was given (None: not given; get_device checks they fit)."""
    return {"serial": serial, "cpu": cpu, "xnnpack": xnnpack}


def resolve_device(name: str, serial: str | None, cpu: str | None, xnnpack: bool | None) -> Device:
    """The Device a command measures on, made once at the CLI's edge with its options."""
    from edgekit.devices import get_device

    return get_device(name, **device_options(serial, cpu, xnnpack))


def resolve_artifacts(paths: Iterable[Path | str], foreign: ForeignFlags | None) -> list[Any]:
    """The Artifacts a command was given, loaded once at the CLI's edge: a file another tool
    made is described from itself and the ``foreign`` flags."""
    from edgekit.artifacts.artifact import load_artifact

    return [load_artifact(path, foreign=foreign) for path in paths]


# edgekit.artifacts.foreign.ForeignOptions, imported where used (the CLI starts fast)
ForeignOptions = Any

# what a foreign model file (one edgekit did not make) cannot say about itself
FOREIGN_FLAGS: dict[str, Any] = {
    "config": Annotated[
        Path | None,
        typer.Option("--config", help="edgekit.toml whose \\[model] table describes files"),
    ],
    "layout": Annotated[
        str | None, typer.Option("--layout", help="foreign file: NCHW or NHWC (else inferred)")
    ],
    "input_shape": ShapeOption,
    "input_size": Annotated[
        str | None, typer.Option("--input-size", help="foreign file: H,W of a dynamic input")
    ],
    "channels": Annotated[
        int | None, typer.Option("--channels", help="foreign file: channels of a dynamic input")
    ],
    "mean": Annotated[
        str | None, typer.Option("--mean", help="per channel, e.g. 0.485,0.456,0.406")
    ],
    "std": Annotated[str | None, typer.Option("--std", help="per channel, e.g. 0.229,0.224,0.225")],
    "scale": Annotated[
        float | None, typer.Option("--scale", help="images in [0,1] times this first (255: 0..255)")
    ],
    "class_names": Annotated[
        Path | None, typer.Option("--class-names", help="file with one class name per line")
    ],
}


def with_foreign_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the flags of ``FOREIGN_FLAGS``; it receives them as one
    ``foreign: ForeignOptions`` argument (the same for bench, eval, check and run)."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)  # typer reads objects, not text
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != "foreign"
    ]
    # flags the command has itself (run's --config holds [run] and [model]; export's
    # --input-shape) reach both the command and the foreign options
    shared = set(FOREIGN_FLAGS) & set(signature.parameters)
    flags_of = {k: v for k, v in FOREIGN_FLAGS.items() if k not in shared}
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in flags_of.items()
    ]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        flags = {name: kwargs.pop(name) for name in flags_of}
        flags.update({name: kwargs[name] for name in shared})
        return command(**kwargs, foreign=foreign_options(**flags))

    wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
    annotations = {k: v for k, v in hints.items() if k != "foreign"}
    wrapper.__annotations__ = {**annotations, **flags_of}
    return wrapper


def named_boards(config: Path | None) -> None:
    """The ``[devices.NAME]`` boards of an edgekit.toml become devices of this command."""
    if config is not None:
        from edgekit.common.fileio import read_toml
        from edgekit.devices.ssh.board import add_boards

        add_boards(read_toml(config).get("devices", {}), config)


def foreign_options(
    config: Path | None = None,
    layout: str | None = None,
    input_shape: str | None = None,
    input_size: str | None = None,
    channels: int | None = None,
    mean: str | None = None,
    std: str | None = None,
    scale: float | None = None,
    class_names: Path | None = None,
) -> Any:
    """ForeignOptions from the flags over ``[model]`` of ``--config`` (flags win)."""
    from dataclasses import replace

    from edgekit.artifacts.foreign import ForeignOptions, load_model_section

    base = load_model_section(config) if config is not None else ForeignOptions()
    named_boards(config)
    given: dict[str, Any] = {"layout": layout, "scale": scale}
    if class_names is not None:
        given["class_names"] = str(class_names)
    for key, text in (("mean", mean), ("std", std)):
        if text is not None:
            given[key] = [_number(part, f"--{key}", text) for part in parse_csv(text)]
    if input_shape is not None:
        given["input_shape"] = list(parse_shape(input_shape))
    elif input_size is not None or channels is not None:
        given["input_size"] = list(_size(input_size)) if input_size else [-1, -1]
        given["channels"] = -1 if channels is None else channels
    flags = ForeignOptions.from_dict(
        {k: v for k, v in given.items() if v is not None}, "command line"
    )
    return replace(base, **flags.given())


def _number(part: str, flag: str, text: str) -> float:
    try:
        return float(part)
    except ValueError:
        raise UserInputError(f"{flag} '{text}': expected numbers such as 0.5,0.5,0.5") from None


def _size(text: str) -> tuple[int, int]:
    try:
        height, width = (int(part) for part in text.split(","))
    except ValueError:
        raise UserInputError(f"--input-size '{text}': expected H,W such as 224,224") from None
    if min(height, width) < 1:
        raise UserInputError(f"--input-size '{text}': both sizes must be positive")
    return height, width


def with_runtime_options(artifacts: list[Any], choice: str, device: str) -> list[Any]:
    """``artifacts`` as tuned (``tuned``; one line for each tuned on another CPU model, which
    opens with edgekit's defaults), or with the tuned options left out (``default``)."""
    from edgekit.artifacts.artifact import Artifact
    from edgekit.artifacts.runtime_options import tuned_elsewhere, without_tuning

    if choice not in (TUNED, "default"):
        raise UserInputError(f"--runtime-options {choice}: choose tuned or default")
    if choice == TUNED:
        from edgekit.cli.console import err_console
        from edgekit.common.machine import cpu_model

        for artifact in artifacts:
            elsewhere = tuned_elsewhere(artifact.manifest, device)
            if elsewhere:
                err_console.print(
                    f"{artifact.path.name}: tuned on {elsewhere}, not this "
                    f"{cpu_model()}: opened with edgekit's defaults (edgekit "
                    "tune it here)"
                )
        return artifacts
    return [Artifact(a.path, without_tuning(a.manifest)) for a in artifacts]


def tuned_thread_count(artifacts: list[Any], device: str) -> str:
    """The thread count ``edgekit tune`` chose for ``device`` where every artifact has the same
    one; else 1, said where they differ."""
    from edgekit.artifacts.runtime_options import tuned_threads
    from edgekit.cli.console import err_console

    counts = {tuned_threads(a.manifest, device) for a in artifacts}
    if len(counts) == 1 and None not in counts:
        return str(counts.pop())
    if counts != {None}:
        err_console.print(
            f"not every artifact was tuned here to one thread count on {device}; "
            "measuring at 1 (give --threads)"
        )
    return "1"
