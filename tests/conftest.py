"""Shared fixtures: the default classifier and its dataset, loaded once per test session."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", category=FutureWarning)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Under pytest-xdist each worker gets its share of the cores for the thread pools that size
# themselves to the machine (torch's OpenMP, TensorFlow's): two workers each spinning two
# OpenMP threads on two cores made torch's own forward passes 1.5x slower (digits-mobilenet on
# 899 images: 1.37 s per pass at one thread each, 1.94-2.09 s at two, side by side on a 2-core
# Intel Xeon). Set before torch starts, so the workers' children inherit it; a test that sets
# threads itself (a bench, a tune) still gets what it asks for.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if WORKERS > 1:
    THREAD_SHARE = str(max(1, (os.cpu_count() or 1) // WORKERS))
    for variable in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(variable, THREAD_SHARE)

# pytest-xdist hands whole files to the workers in the order the workers collected them (`make
# test` passes --no-loadscope-reorder: xdist's own order, by number of tests, put the 10-test
# training file, 80 s, last, with the other worker idle meanwhile). The longest files go first, so
# that the workers end together: per-file seconds from pytest's junit file
# (scripts/suite_times.py). First the files whose time is mostly `long` tests (`make test-all`:
# the board's 657 s, the culprit's 376 s, ...; a push runs only their quick tests), then the
# longest of a push (`make test`). A file not named keeps its place after them; a name here must
# be a file (tested).
LONGEST_FILES_FIRST = (
    "test_board.py", "test_culprit.py", "test_run.py", "test_huggingface.py", "test_cluster.py",
    "test_main_paths.py", "test_tune.py", "test_training.py", "test_intervals.py",
    "test_layer_mapping.py", "test_target_executorch.py", "test_regression_gates.py",
    "test_docs.py", "test_target_tflite.py", "test_bad_input.py", "test_foreign.py",
    "test_golden.py", "test_cli.py", "test_memory.py", "test_report.py", "test_readers.py",
    "test_android.py", "test_golden_verify.py", "test_interrupts.py", "test_arm64_emu.py",
    "test_profile.py", "test_bench.py", "test_quantize_debug.py", "test_required_skips.py",
    "test_flips.py",
)  # fmt: skip


# torch's log handlers keep the sys.stderr of the moment torch is first imported: imported
# inside a test's capsys, they would write to that test's closed stream in every later test
import torch  # noqa: E402

if WORKERS > 1:  # torch may have started before this file (a plugin imported it)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# What a test needs from the machine, by marker; EDGEKIT_TEST_REQUIRE (``.ci/run`` sets it) names
# the ones this machine must have: a test of such a marker that skips fails instead, with the
# skip's reason, so a missing driver or a refused namespace cannot turn a regression green.
CAPABILITIES = ("gpu", "arm64", "cluster", "needs_root", "browser", "board")
REQUIRE_ENV = "EDGEKIT_TEST_REQUIRE"
CAPABILITIES_LIST_ENV = "EDGEKIT_TEST_LIST_CAPABILITIES"


def required_capabilities() -> set[str]:
    named = {part.strip() for part in os.environ.get(REQUIRE_ENV, "").split(",") if part.strip()}
    unknown = sorted(named - set(CAPABILITIES))
    if unknown:
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={os.environ[REQUIRE_ENV]}: unknown capability "
            f"{', '.join(unknown)} (choose from {', '.join(CAPABILITIES)})"
        )
    return named


def pytest_configure(config: pytest.Config) -> None:
    config.edgekit_required = required_capabilities()  # an unknown name stops the run at once
    if config.edgekit_required:  # CI: Hypothesis draws the same examples on every run
        from hypothesis import settings

        settings.register_profile("ci", derandomize=True)
        settings.load_profile("ci")


# `long` by node id (the file says why each one is); marked as each test is collected, before
# -m selects
LONG_TESTS = {
    line.split("#")[0].strip()
    for line in (Path(__file__).parent / "long_tests.txt").read_text().splitlines()
    if line.split("#")[0].strip()
}
LONG_FOUND: set[str] = set()


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.nodeid in LONG_TESTS:
        item.add_marker(pytest.mark.long)
        LONG_FOUND.add(item.nodeid)


@pytest.hookimpl(trylast=True)  # after -m has deselected: the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole
    carried = {mark.name for item in items for mark in item.iter_markers()} & set(CAPABILITIES)
    listing = os.environ.get(CAPABILITIES_LIST_ENV)
    if listing:  # tests/test_required_skips.py: what a CI selection needs of its machine
        unknown = sorted(LONG_TESTS - LONG_FOUND)
        Path(listing).write_text(json.dumps({"capabilities": sorted(carried), "no_test": unknown}))
    unnamed = sorted(carried - config.edgekit_required)
    if config.edgekit_required and unnamed:  # they would skip on a machine without it, unseen
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={os.environ[REQUIRE_ENV]} leaves out {', '.join(unnamed)}, which "
            "tests of this selection need: name it in the CI script that runs them"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    marks = {mark.name for mark in item.iter_markers()}
    needed = marks & item.config.edgekit_required
    if not report.skipped or hasattr(report, "wasxfail") or not item.config.edgekit_required:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    if needed:
        report.outcome = "failed"
        report.longrepr = (
            f"{REQUIRE_ENV} requires {', '.join(sorted(needed))}, and this test skipped: {reason}"
        )
    elif not marks & set(CAPABILITIES):  # a skip CI cannot tell from a regression
        report.outcome = "failed"
        report.longrepr = (
            f"{REQUIRE_ENV} is set and this test skipped without a capability marker "
            f"({', '.join(CAPABILITIES)}): {reason}"
        )


@pytest.fixture(scope="session")
def weights_cache() -> str:
    """edgekit's cache as the session started (pytester later gives inner runs a fresh HOME)."""
    from edgekit.common.cache import cache_dir

    return str(cache_dir())


@pytest.fixture(scope="session")
def digits_model(weights_cache):
    from edgekit.sources.load import load_model

    return load_model("digits-mobilenet", quiet=True)


@pytest.fixture(scope="session")
def digits_data(digits_model):
    from edgekit.sources.data import load_dataset

    return load_dataset("digits", digits_model.preprocess)


@pytest.fixture(scope="session")
def reference(digits_model, digits_data):
    """100 evaluation images and the source model's logits for them."""
    x = digits_data.evaluation.x[:100]
    return x, digits_model.predict(x)


@pytest.fixture
def source_forward_passes(monkeypatch) -> list[int]:
    """The source models' forward passes from here on, by number of images, over a fresh
    process-wide memo of their logits (``edgekit.sources.logits``)."""
    from edgekit.sources import source as source_module
    from edgekit.sources.logits import SourceLogits
    from edgekit.sources.source import SourceModel

    monkeypatch.setattr(source_module, "SOURCE_LOGITS", SourceLogits())
    passes: list[int] = []
    forward = SourceModel._forward
    monkeypatch.setattr(
        SourceModel, "_forward", lambda self, x: passes.append(len(x)) or forward(self, x)
    )
    return passes


@pytest.fixture(scope="session")
def calibration(digits_data):
    from edgekit.quantize.calibration import sample_calibration

    return sample_calibration(digits_data, 200)


STORE_ENV = "EDGEKIT_TEST_STORE"


@pytest.fixture(scope="session")
def artifact_store(tmp_path_factory) -> Path:
    """One folder of exported artifacts for the whole test run: ``EDGEKIT_TEST_STORE`` where
    set (``make test`` gives both of its phases one fresh folder), else under pytest-xdist the
    folder its workers share (their base temp's parent), else this session's own."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get(STORE_ENV):
        store = Path(os.environ[STORE_ENV])
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        store = root.parent / "artifact-store"
    else:
        store = root / "artifact-store"
    store.mkdir(parents=True, exist_ok=True)
    return store


@pytest.fixture(scope="session")
def export_digits(digits_model, digits_data, artifact_store):
    """``export_digits(target, recipe, io="float32")`` -> Artifact, exported once per test run
    (across parallel workers, behind a file lock). Shared files must stay as exported: a test
    that damages one in place, instead of a copy, fails the session's teardown by name. Beside
    each artifact, ``info.json`` holds what the target itself reported (its raw ExportInfo)."""
    import hashlib
    import json

    from filelock import FileLock

    from edgekit.artifacts.artifact import load_artifact
    from edgekit.export.pipeline import export_artifact
    from edgekit.targets import get_target

    loaded, digests = {}, {}

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def export(target: str, recipe: str, io: str = "float32"):
        key = (target, recipe, io)
        if key in loaded:
            return loaded[key]
        folder = artifact_store / f"{digits_model.digest[:12]}-{target}-{recipe}-{io}"
        done = folder / "artifact.txt"  # the artifact's file name, written once it is complete
        with FileLock(str(folder) + ".lock"):
            if not done.is_file():
                folder.mkdir(exist_ok=True)
                plugin = get_target(target)
                reported = []

                def recording(request, real=plugin.export):
                    reported.append(real(request))
                    return reported[-1]

                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(plugin, "export", recording)
                    result = export_artifact(
                        digits_model, digits_data, target, recipe, out_dir=folder, io_dtype=io
                    )
                [info] = reported
                (folder / "info.json").write_text(json.dumps({
                    "input": info.input.to_dict(), "output": info.output.to_dict(),
                    "details": info.details, "warnings": info.warnings,
                }))  # fmt: skip
                done.write_text(result.artifact.path.name)
        loaded[key] = load_artifact(folder / done.read_text())
        for path in folder.iterdir():
            digests.setdefault(path, digest(path))
        return loaded[key]

    yield export
    changed = [str(path) for path, before in digests.items() if digest(path) != before]
    assert not changed, f"a test changed shared artifacts in place (copy them first): {changed}"


@pytest.fixture(scope="session")
def digits_export(export_digits):
    """``digits_export(target, recipe, io="float32")`` -> (path, manifest, ExportInfo): a stored
    artifact of ``export_digits`` with what its target reported, as target tests read it."""
    import json

    from edgekit.targets.base import ExportInfo, TensorSpec

    def get(target: str, recipe: str, io: str = "float32"):
        artifact = export_digits(target, recipe, io)
        raw = json.loads((artifact.path.parent / "info.json").read_text())
        info = ExportInfo(
            TensorSpec.from_dict(raw["input"]), TensorSpec.from_dict(raw["output"]),
            raw["details"], raw["warnings"],
        )  # fmt: skip
        return artifact.path, artifact.manifest, info

    return get


@pytest.fixture(scope="session")
def keras_digits_files(artifact_store) -> dict:
    """A Keras digits CNN's TFLiteConverter files (fp32, dynamic, fp16, int8 I/O), a float file
    ending in CUMSUM (an op XNNPACK does not take), and the Keras model's own top-1 on edgekit's
    evaluation split under ``"own_top1"``: made once per test run, behind a file lock."""
    import json

    import foreign_files
    import numpy as np
    from filelock import FileLock

    folder = artifact_store / "keras-digits"
    done = folder / "made.json"
    with FileLock(str(folder) + ".lock"):
        if not done.is_file():
            from edgekit.sources.data import load_dataset
            from edgekit.sources.preprocess import Preprocess

            folder.mkdir(exist_ok=True)
            model = foreign_files.keras_digits()
            files = foreign_files.tflite_files(model, folder)
            files["cumsum"] = foreign_files.tflite_with_a_fallback_op(folder)
            split = load_dataset(
                "digits", Preprocess((8, 8), 1, (0.0,), (1.0,), tuple("0123456789"))
            )
            x = split.evaluation.x.transpose(0, 2, 3, 1)
            own = float(np.mean(np.argmax(model.predict(x, verbose=0), 1) == split.evaluation.y))
            made = {name: path.name for name, path in files.items()}
            done.write_text(json.dumps({"files": made, "own_top1": own}))
    made = json.loads(done.read_text())
    return {**{name: folder / file for name, file in made["files"].items()},
            "own_top1": made["own_top1"]}  # fmt: skip


@pytest.fixture(scope="session")
def digits_foreign_pte(digits_model, artifact_store):
    """``digits_foreign_pte(xnnpack=True)`` -> a .pte of the default model made with
    ExecuTorch's own API, as a user would (no manifest): once per test run, behind a lock."""
    import foreign_files
    from filelock import FileLock

    def made(xnnpack: bool = True) -> Path:
        path = artifact_store / f"foreign-{'xnnpack' if xnnpack else 'portable'}.pte"
        with FileLock(str(path) + ".lock"):
            if not path.is_file():
                partial = path.with_name(path.name + ".partial")
                foreign_files.executorch_pte(
                    digits_model.module, digits_model.example_input(), partial, xnnpack=xnnpack
                )
                partial.rename(path)
        return path

    return made
