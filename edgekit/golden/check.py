"""``edgekit golden --check BUNDLE [ARTIFACT] --device D``: the bundle's images through an
artifact on a device edgekit has, against the bundle's expected outputs and tolerances. Two
things are checked: that the artifact's own staging of stage 2 gives the bundle's stage-3
tensors bit for bit (the input contract an app codes against), and that the device's outputs
agree with the expected ones within the bundle's measured tolerance."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifacts.artifact import Artifact, as_artifact
from edgekit.devices import DEFAULT_DEVICE
from edgekit.errors import DeviceUnavailable
from edgekit.golden.bundle import Bundle, read_bundle
from edgekit.golden.images import model_input, tensor_input
from edgekit.golden.make import bundle_preprocess
from edgekit.golden.tolerance import compare, kernels_of

if TYPE_CHECKING:
    from edgekit.devices.base import Device


@dataclass
class GoldenCheck:
    """One bundle checked against one artifact on one device."""

    bundle: str
    artifact: str
    device: str
    same_file: bool  # the artifact is the one the bundle was made from
    inputs_match: bool  # its staging of stage 2 gives the bundle's stage 3
    input_mismatch: str | None
    atol: float
    comparison: dict[str, Any]
    runtime: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # how this device's outputs were had, where it is not the usual

    @property
    def passed(self) -> bool:
        return self.inputs_match and bool(self.comparison["passed"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle,
            "artifact": self.artifact,
            "device": self.device,
            "same_file": self.same_file,
            "inputs_match": self.inputs_match,
            "input_mismatch": self.input_mismatch,
            "atol": self.atol,
            **self.comparison,
            "passed": self.passed,
            "runtime": self.runtime,
            "note": self.note,
        }


def staged_inputs(bundle: Bundle, artifact: Artifact) -> tuple[np.ndarray, str | None]:
    """The bundle's stage-2 images as ``artifact`` stages them (NCHW float samples), and the
    first image whose stage-3 tensor the artifact would not take bit for bit (None: all do)."""
    pre = bundle_preprocess(artifact)
    given = artifact.manifest.input
    samples, mismatch = [], None
    for index in range(bundle.count):
        sample = model_input(bundle.rgb(index), pre)
        samples.append(sample)
        if mismatch is None:
            ours, theirs = tensor_input(sample, given), bundle.tensor(index)
            if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
                mismatch = (
                    f"image {index}: the artifact takes {ours.dtype}{list(ours.shape)}, the bundle "
                    f"holds {theirs.dtype}{list(theirs.shape)}"
                )
            elif not np.array_equal(ours, theirs):
                differing = int(np.count_nonzero(ours != theirs))
                mismatch = (
                    f"image {index}: {differing} of {ours.size} input values differ from the "
                    "bundle's stage 3 (the preprocessing or the input quantization changed)"
                )
    return np.concatenate(samples), mismatch


def check_bundle(
    bundle: Bundle | str | Path,
    *,
    artifact: Artifact | str | Path | None = None,
    device: Device | str = DEFAULT_DEVICE,
    threads: int = 1,
) -> GoldenCheck:
    """``bundle`` (its digests checked) through ``artifact`` (the bundle's own by default) on
    ``device`` (a name or a Device)."""
    from edgekit.devices import as_device

    bundle = bundle if isinstance(bundle, Bundle) else read_bundle(bundle)
    artifact = as_artifact(artifact if artifact is not None else bundle.artifact_path)
    device = as_device(device)
    runner_path = getattr(device, "golden_outputs", None)  # a device whose runner reads files
    if runner_path is not None:
        reason = device.golden_unavailable_reason(artifact)
        if reason:
            raise DeviceUnavailable(reason)
        return _check_by_files(bundle, artifact, device)
    if not device.traits().predicts:
        raise DeviceUnavailable(
            f"{device.name}: edgekit's runners there return timings, not outputs; run the "
            f"bundle's runner in the app instead ({bundle.root / 'README.md'})"
        )
    reason = device.unavailable_reason(artifact)
    if reason:
        raise DeviceUnavailable(reason)
    samples, mismatch = staged_inputs(bundle, artifact)
    kernels = kernels_of(device)
    atol = bundle.atol_for(kernels)
    if atol is None:
        raise DeviceUnavailable(
            f"{bundle.root}: no {kernels} outputs were measured when it was made, so it has no "
            f"tolerance for {device.name} (make it where {device.name} runs)"
        )
    got, runtime = device.predict(artifact, samples, threads)
    return _checked(bundle, artifact, device, got, runtime, mismatch=mismatch, atol=atol)


def _checked(
    bundle: Bundle,
    artifact: Artifact,
    device: Device,
    got: np.ndarray,
    runtime: dict[str, Any],
    *,
    mismatch: str | None,
    atol: float,
    note: str | None = None,
) -> GoldenCheck:
    """The device's outputs against the bundle's expected ones, as a GoldenCheck."""
    return GoldenCheck(
        bundle=str(bundle.root),
        artifact=str(artifact.path),
        device=device.name,
        same_file=artifact.manifest.file.sha256 == bundle.spec["artifact"]["sha256"],
        inputs_match=mismatch is None,
        input_mismatch=mismatch,
        atol=atol,
        comparison=compare(got, bundle.expected_logits(), atol),
        runtime=runtime,
        note=note,
    )


RUNNER_NOTE = (
    "outputs from the device's own runner fed the raw stage-3 files; it cannot stage stage 2, "
    "so inputs_match was checked on the host; compared with the CPU tolerance"
)


def _check_by_files(bundle: Bundle, artifact: Artifact, device: Device) -> GoldenCheck:
    """The bundle through a device whose runner reads raw input files and hands outputs back:
    the bundle's stage-3 files where the artifact takes them bit for bit, else the artifact's
    own staging of stage 2 (so a different artifact still runs, and fails on its inputs)."""
    samples, mismatch = staged_inputs(bundle, artifact)
    with tempfile.TemporaryDirectory(prefix="edgekit-golden-") as folder:
        if mismatch is None:
            files = [bundle.root / image["stage3_raw"] for image in bundle.spec["images"]]
        else:
            files = []
            for index in range(bundle.count):
                path = Path(folder) / f"{index:03d}.bin"
                given = artifact.manifest.input
                path.write_bytes(tensor_input(samples[index : index + 1], given).tobytes())
                files.append(path)
        got, runtime = device.golden_outputs(artifact, files)
    cpu_atol = bundle.atol  # the runners run CPU kernels
    return _checked(
        bundle, artifact, device, got, runtime, mismatch=mismatch, atol=cpu_atol, note=RUNNER_NOTE
    )
