"""The models of a run (``Subject``): a source model, or a file measured as it is, with its
dataset; made once from the run's configuration, at the start of a run or a resume."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.artifacts.artifact import Artifact
from edgekit.errors import UserInputError
from edgekit.run.config import RunConfig
from edgekit.sources.data import Dataset, load_dataset
from edgekit.sources.load import load_model
from edgekit.sources.source import SourceModel

if TYPE_CHECKING:
    from edgekit.artifacts.foreign import ForeignOptions


@dataclass
class Subject:
    """One model of a run: a source model, or a file measured as it is, and its dataset."""

    spec: str
    data: str
    source: SourceModel | None
    given: Artifact | None
    dataset: Dataset | None

    @property
    def name(self) -> str:
        return self.source.name if self.source is not None else self.given.path.stem

    def info(self, macs: int | None) -> dict[str, Any]:
        if self.source is not None:
            return {
                "spec": self.source.spec,
                "name": self.source.name,
                "digest": self.source.digest,
                "load_options": self.source.load_options,
                "macs": macs,
            }
        manifest = self.given.manifest
        return {
            "spec": self.spec,
            "name": self.name,
            "digest": manifest.file.sha256,
            "load_options": {},
            "foreign": manifest.foreign,
            "macs": macs,
        }

    def data_info(self) -> dict[str, Any]:
        return {
            "spec": self.data if self.dataset is not None else None,
            "digest": self.dataset.digest if self.dataset is not None else None,
            "evaluation_samples": len(self.dataset.evaluation) if self.dataset is not None else 0,
        }


def subjects(config: RunConfig, foreign: ForeignOptions | None = None) -> list[Subject]:
    found = []
    for spec in config.model_specs():
        data = config.data_for.get(spec, config.data)
        given = _given_artifact(spec, foreign)
        if given and config.weights is not None:
            raise UserInputError(f"{spec}: a model file brings its own weights; drop --weights")
        source = (
            None
            if given
            else load_model(spec, weights=config.weights, quiet=True, foreign=foreign, data=data)
        )
        found.append(Subject(spec, data, source, given, _dataset(data, source, given)))
    return found


def _given_artifact(spec: str, foreign: ForeignOptions | None) -> Artifact | None:
    """A .tflite/.pte given as the model: measured as it is (an .onnx is a source model)."""
    from edgekit.artifacts.artifact import load_artifact
    from edgekit.targets import get_target, target_for_suffix

    name = target_for_suffix(Path(spec).suffix)
    if name is None or get_target(name).loads_source:
        return None
    return load_artifact(Path(spec), foreign=foreign)


def _dataset(spec: str, source: SourceModel | None, given: Artifact | None) -> Dataset | None:
    if source is not None:
        return load_dataset(spec, source.preprocess)
    if not given.classifier:
        return None  # latency only, on inputs made from the file's own specs
    from edgekit.measure.accuracy import dataset_for

    return dataset_for(given, spec)
