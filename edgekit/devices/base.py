"""The device protocol: what a device can do and what its figures mean.

A device plugin imports this one module: the base class and its traits, the registry's two
calls (``add_device``, ``register``), ``Accelerator``, the timing contract
(``LatencyProtocol``, ``Block``, ``BlockTimer``) and the host worker (``artifact_timer``,
``WorkerTimer``, ``predict_in_child``) for a device that runs artifacts on this machine
(``tests/plugins/nice_cpu_device.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgekit.devices import add_device, register
from edgekit.errors import UserInputError
from edgekit.targets.session import Accelerator
from edgekit.worker.latency import Block, BlockTimer, LatencyProtocol
from edgekit.worker.parent import WorkerTimer, artifact_timer, predict_in_child

if TYPE_CHECKING:
    from edgekit.artifacts.artifact import Artifact

__all__ = [
    "Accelerator",
    "Block",
    "BlockTimer",
    "Device",
    "DeviceTraits",
    "LatencyProtocol",
    "WorkerTimer",
    "add_device",
    "artifact_timer",
    "predict_in_child",
    "register",
]


@dataclass(frozen=True)
class DeviceTraits:
    """What a device's figures may be used for; every row stores them, reports read them."""

    latency_comparable: bool  # a real latency of this device: Pareto, recommendation
    predicts: bool = True  # android's official runners return timings only
    compare_to_host: bool = False  # accuracy also reports |device - host| logits (arm64-emu)
    note: str = ""  # the one line reports print ("emulated: not a phone's speed")
    # host: the machine the baseline runs on (speed-ups against it, interleaved); remote: a
    # phone; server: a GPU server's execution providers (never mixed with on-device rows)
    where: str = "host"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Device:
    """Subclass per device (or family: cpu and gpu share one module)."""

    name: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()  # keyword options get_device accepts
    summary: ClassVar[str] = ""  # one line for --help and doctor
    how_to_add: ClassVar[str] = ""  # one line: what gives a machine this device
    # edgekit tune searches runtime options here (sessions it opens with session_options)
    tunable: ClassVar[bool] = False
    tells_memory: ClassVar[bool] = False  # edgekit.measure.memory can probe a session here
    # where it cannot, why (one line), when the default line would say too little
    no_memory_probe: ClassVar[str] = ""

    def __init__(self, **options: Any) -> None:
        self.settings = options

    def traits(self, runtime: dict[str, Any] | None = None) -> DeviceTraits:
        raise NotImplementedError

    def absent(self) -> str | None:
        """None when this machine has the device at all, else why not (one line): a run skips
        an absent device it was not asked for by name, and refuses one it was."""
        return None

    def why_unavailable(self, artifact: Artifact) -> str | None:
        """``unavailable_reason``, asked once per artifact file of this device object: a pool
        asks before it evaluates and times its artifacts, and both then reuse the answer (a
        phone's is an adb round trip)."""
        # kept on the object itself: a plugin's __init__ may not call this class's
        asked = self.__dict__.setdefault("_unavailable", {})
        key = str(artifact.path)
        if key not in asked:
            asked[key] = self.unavailable_reason(artifact)
        return asked[key]

    def unavailable_reason(self, artifact: Artifact) -> str | None:
        """None when this device can run ``artifact`` here, else why not (one line)."""
        return None

    def predict(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, dict]:
        """Float32 logits of NCHW float32 ``x``, and what ran them."""
        raise NotImplementedError

    def timer(
        self,
        artifact: Artifact,
        threads: int,
        sample: np.ndarray | None,
        protocol: LatencyProtocol,
        timeout_s: float,
    ) -> BlockTimer:
        """A loaded, warmed-up latency source for the interleaver."""
        raise NotImplementedError

    def host_reference(
        self, artifact: Artifact, x: np.ndarray, threads: int = 1
    ) -> tuple[np.ndarray, str]:
        """The same artifact's logits on the host (devices whose traits say compare_to_host)."""
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        """What doctor reports about this device on this machine."""
        return {}

    def setup(self, progress: Callable[[str], None], **options: Any) -> None:
        raise UserInputError(f"device {self.name}: nothing to set up")

    def advertise(self) -> dict[str, float]:
        """The Ray custom resources this device gives the machine's cluster node (empty when
        the device is not here): ``edgekit_device_<name>`` and what tells instances apart."""
        return {}

    def label_suffix(self, runtime: dict[str, Any]) -> str:
        """Appended to an artifact's label when the session ran a variant (``-builtin``)."""
        variant = runtime.get("variant")
        return f"-{variant}" if variant else ""
