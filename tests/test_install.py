"""edgekit as users install it: a wheel (not the editable checkout every other test imports) that
ships every package, a lock that resolves on each Python requires-python admits, and extras that
give an environment exactly one onnxruntime. The resolutions are pip's own (``--dry-run
--report``: metadata only, nothing installed); they need the package index, as ``make`` does.
scripts/wheel-smoke.sh installs the wheel and runs it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging import tags
from packaging.requirements import Requirement
from packaging.specifiers import Specifier
from packaging.utils import canonicalize_name, parse_wheel_filename

from edgekit.common.layout import MAPPED, source_files
from edgekit.common.pipcheck import missing_runtime, onnxruntime_problem

ROOT = Path(__file__).parent.parent
LOCK = ROOT / "requirements.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# sdist-only on the index at the locked version, pure Python (hydra-core's pin): pip builds it on
# any Python, so it needs no wheel for 3.12
SDIST_ONLY = {"antlr4-python3-runtime"}


def _pins(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        requirement = Requirement(line)
        [spec] = requirement.specifier
        assert spec.operator == "==", line
        found[canonicalize_name(requirement.name)] = spec.version
    return found


LOCKED = _pins([line for line in LOCK.read_text().splitlines() if line and line[0] != "#"])


def _resolve(*args: str) -> list[dict]:
    """What ``pip install`` would install, from nothing: its report's ``install`` list."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["install"]


def test_the_wheel_ships_every_package_of_the_tree_and_the_weights(tmp_path):
    source = tmp_path / "source"
    subprocess.run([sys.executable, ROOT / "scripts" / "source_tree.py", source], check=True)
    # the sdist, then the wheel from it (python -m build's default): both must hold everything
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(source)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = tmp_path.glob("edgekit_bench-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    # every module of edgekit/ and of the top-level targets/ and quantize/, under edgekit/
    for name, path in source_files().items():
        inside = "/__init__.py" if path.name == "__init__.py" else ".py"
        assert name.replace(".", "/") + inside in shipped, name
    assert "edgekit/cluster/__init__.py" in shipped  # once left out of a hand-written list
    weights = {p.name for p in (ROOT / "edgekit" / "sources" / "weights").glob("*") if p.is_file()}
    assert {f"edgekit/sources/weights/{name}" for name in weights} <= shipped
    # each target's trivial model and its manifest: the runtime's memory floor in bench
    trivial = {f"edgekit/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "targets").glob(
        "*/trivial.*")}  # fmt: skip
    assert len(trivial) == 6 and trivial <= shipped
    entry_points = next(name for name in shipped if name.endswith(".dist-info/entry_points.txt"))
    assert "edgekit = edgekit.supervise:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_top_level_folders_mapped_into_edgekit_are_the_ones_pyproject_maps():
    # pyproject's package-dir is what setup.py packages; edgekit.common.layout walks the same
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == MAPPED
    for name, folder in MAPPED.items():
        assert (ROOT / folder / "__init__.py").is_file()
        assert not (ROOT / "edgekit" / folder).exists()
        assert Path(importlib.import_module(name).__file__).parent == ROOT / folder


def test_every_pin_of_the_lock_has_a_distribution_for_python_3_12():
    # --no-deps: each pin on its own (the lock is already the whole closure); no --only-binary,
    # so that an sdist-only pin shows up as one instead of failing the resolution
    chosen = _resolve("--no-deps", "--python-version", "3.12", "-r", str(LOCK))
    versions = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                for item in chosen}  # fmt: skip
    assert versions == LOCKED
    platforms = list(tags.platform_tags())
    cp312 = {*tags.cpython_tags((3, 12), platforms=platforms),
             *tags.compatible_tags((3, 12), "cp312", platforms)}  # fmt: skip
    sdists = set()
    for item in chosen:
        filename = item["download_info"]["url"].rsplit("/", 1)[-1]
        name = canonicalize_name(item["metadata"]["name"])
        if filename.endswith(".whl"):
            assert parse_wheel_filename(filename)[3] & cp312, filename
        else:
            sdists.add(name)
    assert sdists <= SDIST_ONLY


@pytest.mark.parametrize(("extra", "build"), [("cpu", "onnxruntime"), ("cuda", "onnxruntime-gpu")])
def test_each_onnxruntime_extra_gives_exactly_one_onnxruntime(extra, build):
    # the lock as constraints, as make and gpu_check.sh use it: a constraint installs nothing by
    # itself, so the lock's onnxruntime pin does not come along with the cuda extra
    chosen = _resolve("-c", str(LOCK), f"{ROOT}[{extra}]")
    names = [canonicalize_name(item["metadata"]["name"]) for item in chosen]
    assert [name for name in names if name.startswith("onnxruntime")] == [build]
    assert onnxruntime_problem([build]) is None
    if extra == "cpu":  # the environment make builds: every distribution at its locked version
        for name, item in zip(names, chosen, strict=True):
            version = item["metadata"]["version"]
            # == ignores a local label: the lock's torch==2.13.0 is satisfied by 2.13.0+cpu
            assert name == "edgekit-bench" or Specifier(f"=={LOCKED[name]}").contains(version)


def test_the_check_names_a_missing_or_a_doubled_onnxruntime():
    missing = onnxruntime_problem([])
    assert missing is not None and "\n" not in missing
    assert "onnxruntime is not installed" in missing
    assert "pip install 'edgekit-bench[cpu]'" in missing
    assert "pip install 'edgekit-bench[cuda]'" in missing
    # what the command line prints, instead of an internal error, when neither extra was chosen
    assert missing_runtime(ModuleNotFoundError(name="onnxruntime.quantization")) == missing
    assert missing_runtime(ModuleNotFoundError(name="onnx")) is None
    assert missing_runtime(ValueError("onnxruntime")) is None
    both = onnxruntime_problem(["onnxruntime", "onnxruntime-gpu"])
    assert both is not None and "are both installed" in both
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in both


def test_pip_check_is_clean_in_the_environment_the_suite_runs_in():
    done = subprocess.run([sys.executable, "-m", "edgekit.common.pipcheck"], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no broken requirements" in done.stdout


def test_the_pins_of_pyproject_are_the_pins_of_the_lock():
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"]
    # not in the CPU environment the lock freezes: the GPU build, and torchvision (see pyproject)
    elsewhere = {"onnxruntime-gpu", "torchvision"}
    declared = _pins([*project["dependencies"], *(r for rs in extras.values() for r in rs)])
    for name, version in declared.items():
        if name not in elsewhere:
            assert LOCKED.get(name) == version, name
    assert PYPROJECT["build-system"]["requires"] == [f"setuptools=={LOCKED['setuptools']}"]
