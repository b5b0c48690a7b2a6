"""Bad input through the CLI as a user calls it, across every command: each case gives its exit
code, exactly one error line that names the file or option, no traceback, and nothing partial
in the output folder. The table is the contract of the README's exit-code section."""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import copy_artifact, run_cli
from measured_rows import RECORDED

OUT = "out"  # every command that writes is pointed at tmp_path/out


def _npz(path: Path, x, y, **extra) -> str:
    np.savez(path, x=x, y=y, **extra)
    return str(path)


def _digits_like(n: int = 20, size: int = 8, channels: int | None = None) -> np.ndarray:
    shape = (n, size, size) if channels is None else (n, size, size, channels)
    return np.random.default_rng(0).random(shape).astype(np.float32)


def _broken_copy(artifact, tmp_path: Path, name: str, mutate=None, truncate: int | None = None):
    """A copy of an exported artifact, truncated (with a manifest that still matches its
    digest: the file itself is broken) or with a mutated manifest."""
    path = copy_artifact(artifact.path, tmp_path, name)
    manifest = json.loads(Path(str(path) + ".json").read_text())
    if truncate:
        path.write_bytes(path.read_bytes()[:truncate])
        manifest["file"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest["file"]["size"] = truncate
    if mutate:
        mutate(manifest)
    Path(str(path) + ".json").write_text(json.dumps(manifest))
    return str(path)


def _set(path: str, value):
    def mutate(manifest):
        keys = path.split(".")
        target = manifest
        for key in keys[:-1]:
            target = target[key]
        if value is KeyError:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


def _run_dir(tmp_path: Path, mutate=None, text: str | None = None) -> str:
    directory = tmp_path / "runs" / "r1"
    directory.mkdir(parents=True)
    if text is not None:
        (directory / "results.json").write_text(text)
        return str(directory)
    payload = json.loads(RECORDED.read_text())
    if mutate:
        mutate(payload)
    (directory / "results.json").write_text(json.dumps(payload))
    return str(directory)


def _toml(tmp_path: Path, body: str) -> str:
    path = tmp_path / "edgekit.toml"
    path.write_text(body)
    return str(path)


# id -> (args, setup(tmp_path, artifacts) -> {placeholder: value}, exit code, message)
# a value that is not a number is matched by the parser's refusal ("Invalid value for
# '--max-drop'"): the option's name alone is also in the later checks' messages
CASES = {
    # ---- export -----------------------------------------------------------------------------
    "export-unknown-target": (["export", "--target", "coreml"], None, 2, "unknown target 'coreml'"),
    "export-unknown-recipe": (["export", "--recipe", "int4"], None, 2, "unknown recipe 'int4'"),
    "export-two-recipes": (["export", "--int8", "--fp16"], None, 2, "choose one recipe"),
    "export-zero-calibration": (
        ["export", "--int8", "--calibration-samples", "0"], None, 2, "must be positive"),
    "export-calibration-not-a-number": (
        ["export", "--calibration-samples", "many"], None, 2,
        "Invalid value for '--calibration-samples'"),
    "export-missing-pt2": (["export", "--model", "nowhere/m.pt2"], None, 2, "model file not found"),
    "export-garbage-pt2": (
        ["export", "--model", "{garbage_pt2}"], "garbage_pt2", 2, "not a loadable ExportedProgram"),
    "export-garbage-keras": (
        ["export", "--model", "{garbage_keras}"], "garbage_keras", 2, "not a loadable Keras model"),
    "export-unknown-file-type": (
        ["export", "--model", "{text_file}"], "text_file", 2, "unknown model file type"),
    "culprit-unknown-target": (
        ["culprit", "--target", "coreml"], None, 2, "unknown target 'coreml'"),
    "culprit-a-recipe-it-cannot-convert": (
        ["culprit", "--target", "onnx", "--recipe", "fp16"], None, 2, "--recipe fp16"),
    "culprit-no-time-to-convert": (
        ["culprit", "--target", "onnx", "--timeout", "0"], None, 2, "--timeout 0"),
    "export-no-time-to-convert": (
        ["export", "--target", "onnx", "--timeout", "-5"], None, 2, "--timeout -5"),
    "export-max-drop-under-a-deadline": (
        ["export", "--int8", "--max-drop", "1", "--timeout", "60"], None, 2, "drop --timeout"),
    "culprit-unknown-model": (
        ["culprit", "--target", "onnx", "--model", "zoo:alexnet"], None, 2, "no such zoo model"),
    "export-unknown-zoo-model": (
        ["export", "--model", "zoo:alexnet"], None, 2, "no such zoo model"),
    "export-unimportable-factory": (
        ["export", "--model", "no_such_module:f"], None, 2, "cannot import the factory"),
    "export-factory-raises": (
        ["export", "--model", "user_models:raises"], None, 2, "weights server unreachable"),
    "export-factory-returns-a-string": (
        ["export", "--model", "user_models:not_a_module"], None, 2, "not nn.Module"),
    "export-channels-as-a-word": (
        ["export", "--model", "user_models:channels_as_a_word"], None, 2, "'channels' must be"),
    "export-size-as-one-number": (
        ["export", "--model", "user_models:size_as_one_number"], None, 2, "'input_size' must be"),
    "export-mean-of-the-wrong-length": (
        ["export", "--model", "user_models:mean_of_three_channels"], None, 2, "'mean' must be 1"),
    "export-no-input-shape": (
        ["export", "--model", "user_models:no_shape"], None, 2,
        "does not run on a 1x8x8 (C,H,W) input"),
    "export-bad-input-shape": (
        ["export", "--model", "user_models:no_shape", "--input-shape", "3,x,32"], None, 2,
        "expected C,H,W"),
    "export-zero-input-shape": (
        ["export", "--model", "user_models:no_shape", "--input-shape", "3,0,32"], None, 2,
        "must be positive"),
    "export-weights-for-a-zoo-model": (
        ["export", "--weights", "{text_file}"], "text_file", 2, "bring their own weights"),
    "export-missing-weights": (
        ["export", "--model", "user_models:tiny_cnn", "--weights", "nope.pt"], None, 2,
        "weights file not found"),
    "export-weights-that-run-code": (
        ["export", "--model", "user_models:tiny_cnn", "--weights", "{evil_pickle}"], "evil_pickle",
        2, "would run code"),
    "export-weights-that-do-not-fit": (
        ["export", "--model", "user_models:tiny_cnn", "--weights", "{wrong_weights}"],
        "wrong_weights", 2, "does not fit the model"),
    "export-garbage-weights": (
        ["export", "--model", "user_models:tiny_cnn", "--weights", "{text_file}"], "text_file", 2,
        "not a readable torch state dict"),
    "run-weights-that-do-not-fit": (
        ["run", "--model", "user_models:tiny_cnn", "--weights", "{wrong_weights}"],
        "wrong_weights", 2, "does not fit the model"),
    "eval-weights-that-do-not-fit": (
        ["eval", "--model", "user_models:tiny_cnn", "--weights", "{wrong_weights}"],
        "wrong_weights", 2, "does not fit the model"),
    "eval-weights-for-an-artifact": (
        ["eval", "{no_manifest}", "--weights", "{wrong_weights}"], "no_manifest wrong_weights", 2,
        "--weights applies to a source model"),
    "quantize-debug-weights-that-do-not-fit": (
        ["quantize-debug", "--model", "user_models:tiny_cnn", "--weights", "{wrong_weights}"],
        "wrong_weights", 2, "does not fit the model"),
    "run-weights-for-two-models": (
        ["run", "--model", "digits-mobilenet,user_models:tiny_cnn", "--weights", "{wrong_weights}"],
        "wrong_weights", 2, "weights: applies to one model, not 2"),
    "export-missing-data": (["export", "--data", "missing.npz"], None, 2, "dataset not found"),
    "export-data-of-another-kind": (
        ["export", "--data", "{text_file}"], "text_file", 2, "not a dataset"),
    "export-npz-without-labels": (["export", "--data", "{npz_no_y}"], "npz_no_y", 2, "no 'y'"),
    "export-npz-with-nan": (["export", "--data", "{npz_nan}"], "npz_nan", 2, "NaN or infinite"),
    "export-npz-with-strings": (
        ["export", "--data", "{npz_strings}"], "npz_strings", 2, "must be numbers"),
    "export-npz-float-labels": (
        ["export", "--data", "{npz_float_labels}"], "npz_float_labels", 2, "must be integers"),
    "export-npz-three-classes": (
        ["export", "--data", "{npz_three_classes}"], "npz_three_classes", 2,
        "dataset has 3 classes"),
    "export-npz-labels-out-of-range": (
        ["export", "--data", "{npz_big_labels}"], "npz_big_labels", 2, "labels out of range"),
    "export-npz-four-channels": (
        ["export", "--data", "{npz_rgba}"], "npz_rgba", 2, "4 channel(s)"),
    "export-npz-wrong-shapes": (
        ["export", "--data", "{npz_mismatch}"], "npz_mismatch", 2, "expected x of shape"),
    "export-npz-one-image": (["export", "--data", "{npz_one}"], "npz_one", 2, "at least 2"),
    "export-not-an-npz": (["export", "--data", "{fake_npz}"], "fake_npz", 2, "not a readable .npz"),
    "export-empty-folder": (
        ["export", "--data", "{empty_dir}"], "empty_dir", 2, "no class folders"),
    "export-undecodable-image": (
        ["export", "--data", "{bad_images}"], "bad_images", 2, "does not decode"),
    "export-output-not-writable": (
        ["export", "--target", "onnx", "-o", "{blocked}/x"], "blocked", 2, "not writable"),
    "export-unknown-io": (
        ["export", "--io", "int16"], None, 2, "--io int16: expected float or int8"),
    "export-int8-io-on-onnx": (
        ["export", "--target", "onnx", "--int8", "--io", "int8"], None, 2, "--io int8 applies"),
    "export-unknown-keep-float": (
        ["export", "--target", "onnx", "--int8", "--keep-float", "block99.dw"], None, 2,
        "onnx: no module block99.dw in digits-mobilenet"),
    "export-negative-max-drop": (
        ["export", "--int8", "--max-drop", "-1"], None, 2, "--max-drop must be >= 0"),
    "export-max-drop-without-int8": (["export", "--max-drop", "1"], None, 2, "needs --int8"),
    "export-max-drop-not-a-number": (["export", "--max-drop", "abc"], None, 2,
                                    "Invalid value for '--max-drop'"),
    "export-data-dependent-branch": (
        ["export", "--model", "user_models:branchy", "--target", "onnx"], None, 1,
        "data-dependent control flow"),
    # ---- eval --------------------------------------------------------------------------------
    "eval-missing-artifact": (["eval", "missing.tflite"], None, 2, "artifact not found"),
    # ---- files edgekit did not make (no manifest) ----------------------------------------------
    "foreign-not-a-tflite": (["eval", "{garbage_tflite}"], "garbage_tflite", 2,
                             "not a readable .tflite file"),
    "foreign-not-an-onnx": (["bench", "{garbage_onnx}"], "garbage_onnx", 2,
                            "not a readable ONNX file"),
    "foreign-truncated-onnx": (["eval", "{truncated_bare_onnx}"], "truncated_bare_onnx", 2,
                               "not a readable ONNX file"),
    "foreign-truncated-pte": (["bench", "{truncated_bare_pte}"], "truncated_bare_pte", 2,
                              "t.pte: ExecuTorch cannot load it"),
    "foreign-string-input": (["bench", "{string_input}"], "string_input", 2,
                             "input text is string"),
    "foreign-bool-input": (["eval", "{bool_input}"], "bool_input", 2, "input flag is bool"),
    "foreign-two-inputs-eval": (["eval", "{two_inputs}"], "two_inputs", 2,
                                "accuracy is out of scope: it takes 2 inputs"),
    "foreign-layout-contradicts": (["eval", "{no_manifest}", "--layout", "NHWC"], "no_manifest",
                                   2, "--layout NHWC contradicts the input shape"),
    "foreign-layout-unknown": (["eval", "{no_manifest}", "--layout", "CHW"], "no_manifest", 2,
                               "expected NCHW or NHWC"),
    "foreign-mean-wrong-count": (["eval", "{no_manifest}", "--mean", "0.4,0.5"], "no_manifest", 2,
                                 "'mean' must be 1 number(s), one per channel"),
    "foreign-mean-not-numbers": (["eval", "{no_manifest}", "--mean", "dark"], "no_manifest", 2,
                                 "--mean 'dark'"),
    "foreign-std-zero": (["eval", "{no_manifest}", "--std", "0"], "no_manifest", 2,
                         "'std' must be positive"),
    "foreign-class-names-count": (["eval", "{no_manifest}", "--class-names", "{three_names}"],
                                  "no_manifest three_names", 2, "gives 3 names"),
    "foreign-class-names-missing": (["eval", "{no_manifest}", "--class-names", "nope.txt"],
                                    "no_manifest", 2, "class-names file not found"),
    "foreign-input-shape-contradicts": (["eval", "{no_manifest}", "--input-shape", "3,8,8"],
                                        "no_manifest", 2, "contradicts the model's fixed"),
    "foreign-dynamic-without-shape": (["eval", "{dynamic_hw}"], "dynamic_hw", 2,
                                      "pass --input-shape C,H,W"),
    "foreign-config-unknown-key": (["eval", "{no_manifest}", "--config", "{model_toml_bad}"],
                                   "no_manifest model_toml_bad", 2, "unknown key 'colour'"),
    "foreign-unknown-suffix": (["eval", "{keras_weights}"], "keras_weights", 2,
                               "not a model file edgekit runs"),
    "source-onnx-not-readable": (["export", "--model", "{garbage_onnx}", "--target", "onnx"],
                                 "garbage_onnx", 2, "not a readable ONNX file"),
    "source-onnx-not-a-classifier": (["export", "--model", "{two_inputs}"], "two_inputs", 2,
                                     "needs an image classifier"),
    # ---- audit -------------------------------------------------------------------------------
    "audit-nothing": (["audit"], None, 2, "give one or more model files"),
    "audit-missing": (["audit", "missing.tflite"], None, 2, "model file not found"),
    "audit-not-a-model-suffix": (["audit", "{keras_weights}"], "keras_weights", 2,
                                 "not a model file edgekit reads"),
    "audit-truncated": (["audit", "{truncated_bare_onnx}"], "truncated_bare_onnx", 2,
                        "not a readable ONNX file"),
    "audit-garbage-tflite": (["audit", "{garbage_tflite}"], "garbage_tflite", 2,
                             "not a readable .tflite file"),
    "audit-unknown-expect": (["audit", "{no_manifest}", "--expect", "int4"], "no_manifest", 2,
                             "--expect int4"),
    "audit-unknown-expect-io": (["audit", "{no_manifest}", "--expect-io", "uint16"],
                                "no_manifest", 2, "--expect-io uint16: expected float or int8"),
    "eval-manifest-not-json": (["eval", "{manifest_garbage}"], "manifest_garbage", 2,
                               "not valid JSON"),
    "eval-manifest-without-input": (["eval", "{manifest_no_input}"], "manifest_no_input", 2,
                                    "lacks 'input'"),
    "eval-manifest-empty-shape": (["eval", "{manifest_empty_shape}"], "manifest_empty_shape", 2,
                                  "input.shape [] is not a tensor's shape"),
    "eval-manifest-shape-of-words": (["eval", "{manifest_bad_shape}"], "manifest_bad_shape", 2,
                                     "input.shape: must be list[int]"),
    "bench-manifest-unknown-runtime-option": (["bench", "{manifest_turbo}"], "manifest_turbo", 2,
                                              "unknown runtime option 'turbo'"),
    "golden-nothing": (["golden"], None, 2, "give one ARTIFACT and -o BUNDLE"),
    "golden-check-and-verify": (["golden", "--check", "b", "--verify", "b"], None, 2,
                                "give --check or --verify, not both"),
    "golden-synthetic-data": (["golden", "{onnx_fp32_copy}", "-o", f"{OUT}/bundle", "--data",
                               "synthetic:8"], "onnx_fp32_copy", 2,
                              "synthetic:8: golden vectors need real labelled images"),
    "golden-no-bundle": (["golden", "--check", "missing"], None, 2,
                         "missing: golden bundle not found"),
    "golden-not-a-bundle": (["golden", "--verify", ".", "outputs.npy"], None, 2,
                            ".: not a golden bundle (no SHA256SUMS)"),
    "tune-unknown-option": (["tune", "{onnx_fp32_copy}", "--only", "turbo"], "onnx_fp32_copy", 2,
                            "unknown option(s) turbo for onnx"),
    "eval-manifest-from-the-future": (["eval", "{manifest_future}"], "manifest_future", 2,
                                      "manifest schema 99"),
    "eval-manifest-unknown-target": (["eval", "{manifest_coreml}"], "manifest_coreml", 2,
                                     "target 'coreml'"),
    "eval-manifest-bad-preprocessing": (["eval", "{manifest_bad_pre}"], "manifest_bad_pre", 2,
                                        "preprocessing: 'channels' must be"),
    "eval-modified-artifact": (["eval", "{modified}"], "modified", 2, "modified after export"),
    "eval-truncated-onnx": (["eval", "{truncated_onnx}"], "truncated_onnx", 2,
                            "onnxruntime cannot load it"),
    "eval-truncated-tflite": (["eval", "{truncated_tflite}"], "truncated_tflite", 2,
                              "LiteRT cannot load it"),
    "eval-truncated-pte": (["eval", "{truncated_pte}"], "truncated_pte", 2,
                           "ExecuTorch cannot load it"),
    "eval-unknown-device": (["eval", "{onnx}", "--device", "phone"], "onnx", 2,
                            "unknown device 'phone'"),
    "eval-option-of-another-device": (["eval", "{onnx}", "--device", "gpu", "--serial", "X"],
                                      "onnx", 2, "--serial does not apply to device gpu"),
    "eval-threads-not-a-number": (["eval", "{onnx}", "--threads", "two"], "onnx", 2,
                                  "Invalid value for '--threads'"),
    "eval-data-of-other-classes": (["eval", "{onnx}", "--data", "{npz_three_classes}"],
                                   "onnx npz_three_classes", 2,
                                   "dataset has 3 classes"),
    # ---- profile ----------------------------------------------------------------------------
    "profile-missing-file": (
        ["profile", "missing.tflite"], None, 2, "missing.tflite: artifact not found"),
    "profile-truncated-onnx": (
        ["profile", "{truncated_onnx}"], "truncated_onnx", 2, "not a readable ONNX file"),
    "profile-zero-runs": (
        ["profile", "{onnx}", "--runs", "0"], "onnx", 2, "--runs and --threads must be >= 1"),
    # ---- bench -------------------------------------------------------------------------------
    "bench-nothing": (["bench"], None, 2, "give one or more artifacts"),
    "bench-session-gap-without-sessions": (
        ["bench", "{onnx}", "--sessions", "1", "--session-gap", "60"], "onnx", 2,
        "needs --sessions 2 or more"),
    "bench-negative-session-gap": (
        ["bench", "{onnx}", "--sessions", "2", "--session-gap", "-5"], "onnx", 2, ">= 0 seconds"),
    "run-session-gap-without-sessions": (
        ["run", "--sessions", "1", "--session-gap", "60"], None, 2, "needs --sessions 2 or more"),
    "bench-zero-threads": (["bench", "{onnx}", "--threads", "0"], "onnx", 2, "positive counts"),
    "bench-precision-zero": (["bench", "{onnx}", "--precision", "0"], "onnx", 2,
                             "--precision 0: expected a percentage above 0 and below 100"),
    "bench-precision-over-100": (["bench", "{onnx}", "--precision", "150%"], "onnx", 2,
                                 "--precision 150%: expected a percentage above 0"),
    "bench-precision-not-a-number": (["bench", "{onnx}", "--precision", "abc"], "onnx", 2,
                                     "--precision abc: expected a percentage"),
    "bench-budget-zero": (["bench", "{onnx}", "--budget-s", "0"], "onnx", 2,
                          "--budget-s 0: expected seconds above 0"),
    "run-precision-zero": (["run", "--precision", "0"], None, 2,
                           "--precision 0: expected a percentage above 0 and below 100"),
    "check-precision-not-a-number": (["check", "{onnx}", "--against", "{onnx}",
                                      "--max-latency-regression", "10", "--precision", "abc"],
                                     "onnx", 2, "--precision abc: expected a percentage"),
    "bench-rounds-not-a-number": (["bench", "{onnx}", "--rounds", "lots"], "onnx", 2,
                                  "Invalid value for '--rounds'"),
    "bench-option-of-another-device": (["bench", "{onnx}", "--device", "arm64-emu", "--serial",
                                        "X"], "onnx", 2, "--serial does not apply"),
    "bench-truncated-onnx": (["bench", "{truncated_onnx}", "--no-baseline"], "truncated_onnx", 2,
                             "onnxruntime cannot load it"),
    "bench-truncated-tflite": (["bench", "{truncated_tflite}", "--no-baseline"],
                               "truncated_tflite", 2, "LiteRT cannot load it"),
    "bench-android-without-adb": (["bench", "{onnx}", "--device", "android"], "onnx no_adb", 2,
                                  "adb: not found on PATH"),
    "bench-min-runs-not-a-number": (["bench", "{onnx}", "--min-runs", "x"], "onnx", 2,
                                    "Invalid value for '--min-runs'"),
    # ---- check -------------------------------------------------------------------------------
    "check-nothing": (["check"], None, 2, "give one or more artifacts"),
    "check-flips-a-fraction-of-an-image": (["check", "{onnx}", "--max-flips", "1.5"], "onnx", 2,
                                           "--max-flips 1.5: expected a count"),
    "check-class-drop-negative": (["check", "{onnx}", "--max-class-drop", "-1"], "onnx", 2,
                                  "--max-class-drop -1: expected points"),
    "check-class-drop-not-a-number": (["check", "{onnx}", "--max-class-drop", "abc"], "onnx", 2,
                                      "Invalid value for '--max-class-drop'"),
    "check-collapse-share-above-one": (["check", "{onnx}", "--fail-on-collapse",
                                        "--collapse-share", "1.5"], "onnx", 2,
                                       "--collapse-share 1.5: expected a share"),
    "check-class-drop-without-a-source": (["check", "{no_manifest}", "--max-class-drop", "5"],
                                          "no_manifest", 2, "no source model to count flips"),
    "check-no-bound": (["check", "{onnx}"], "onnx", 2, "give at least one bound"),
    "check-max-drop-not-a-number": (["check", "{onnx}", "--max-drop", "abc"], "onnx", 2,
                                    "Invalid value for '--max-drop'"),
    "check-latency-not-a-number": (["check", "{onnx}", "--max-latency-regression", "ten"], "onnx",
                                   2, "Invalid value for '--max-latency-regression'"),
    "check-latency-without-a-reference": (["check", "{onnx}", "--max-latency-regression", "10"],
                                          "onnx", 2, "needs --against"),
    "check-negative-regression": (["check", "{onnx}", "--max-latency-regression", "-5",
                                   "--against", "{onnx}"], "onnx", 2, "must be >= 0"),
    "check-reference-missing": (["check", "{onnx}", "--max-latency-regression", "10", "--against",
                                 "nope.onnx"], "onnx", 2, "artifact not found"),
    "check-reference-of-another-input": (["check", "{onnx}", "--max-latency-regression", "10",
                                          "--against", "{rgb16}"], "onnx rgb16", 2,
                                         "is not the candidate's"),
    "check-arm-diff-on-the-host": (["check", "{onnx}", "--max-arm-x86-diff", "0.1"], "onnx", 2,
                                   "does not compare with the host"),
    "check-run-without-results": (["check", "{empty_dir}", "--max-drop", "1"], "empty_dir", 2,
                                  "no results.json"),
    "check-peak-negative": (["check", "{onnx}", "--max-peak-mb", "-1"], "onnx", 2,
                            "--max-peak-mb must be >= 0, got -1"),
    "check-peak-not-a-number": (["check", "{onnx}", "--max-peak-mb", "abc"], "onnx", 2,
                                "Invalid value for '--max-peak-mb'"),
    "check-memory-regression-without-a-reference": (["check", "{onnx}", "--max-memory-regression",
                                                     "10"], "onnx", 2,
                                                    "--max-memory-regression on an artifact needs"),
    # ---- run, report, history, compare --------------------------------------------------------
    "run-unknown-device": (["run", "--device", "phone"], None, 2, "unknown device 'phone'"),
    "run-no-device": (["run", "--device", ","], None, 2, "name at least one device"),
    "run-unknown-target": (["run", "--target", "coreml"], None, 2, "unknown target"),
    "run-unknown-recipe": (["run", "--recipe", "int4"], None, 2, "unknown recipe"),
    "run-zero-threads": (["run", "--threads", "0"], None, 2, "positive counts"),
    "run-max-drop-not-a-number": (["run", "--max-drop", "x"], None, 2,
                                  "Invalid value for '--max-drop'"),
    "run-missing-config": (["run", "--config", "nope.toml"], None, 2, "config file not found"),
    "run-config-not-toml": (["run", "--config", "{toml_garbage}"], "toml_garbage", 2,
                            "not valid TOML"),
    "run-config-threads-of-words": (["run", "--config", "{toml_threads}"], "toml_threads", 2,
                                    "'threads' must be list[int]"),
    "run-config-targets-a-number": (["run", "--config", "{toml_targets}"], "toml_targets", 2,
                                    "'targets' must be list[str]"),
    "run-config-unknown-key": (["run", "--config", "{toml_unknown}"], "toml_unknown", 2,
                               "unknown option(s) colour"),
    "run-config-negative-rounds": (["run", "--config", "{toml_rounds}"], "toml_rounds", 2,
                                   "rounds must be positive"),
    "report-empty-folder": (["report", "{empty_dir}"], "empty_dir", 2, "no results.json"),
    "report-not-json": (["report", "{run_garbage}"], "run_garbage", 2, "not valid JSON"),
    "report-row-without-status": (["report", "{run_no_status}"], "run_no_status", 2,
                                  "rows[0]: not a result row"),
    "report-schema-from-the-future": (["report", "{run_future}"], "run_future", 2,
                                      "results schema 99"),
    "report-latency-of-words": (["report", "{run_bad_latency}"], "run_bad_latency", 2,
                                "rows[0].latency: must be"),
    "report-drop-of-words": (["report", "{run_bad_drop}"], "run_bad_drop", 2,
                             "accuracy.drop_points: must be float"),
    "report-memory-peak-a-list": (["report", "{run_bad_memory}"], "run_bad_memory", 2,
                                  "memory.process_peak_mb: must be float | None"),
    "history-corrupt-database": (["history", "--history", "{corrupt_db}"], "corrupt_db", 2,
                                 "not a readable edgekit history database"),
    "history-limit-not-a-number": (["history", "--limit", "all"], None, 2,
                                   "Invalid value for '--limit'"),
    "compare-unknown-run": (["compare", "nope", "nope2", "--history", "{empty_db}"], "empty_db",
                            2, "no run 'nope2'"),
    # ---- quantize-debug, device, zoo, the command line itself ---------------------------------
    "qdebug-unknown-target": (["quantize-debug", "--target", "coreml"], None, 2,
                              "unknown target 'coreml'"),
    "qdebug-samples-not-a-number": (["quantize-debug", "--samples", "x"], None, 2,
                                    "Invalid value for '--samples'"),
    "qdebug-unknown-model": (["quantize-debug", "--model", "zoo:alexnet"], None, 2,
                             "no such zoo model"),
    "qdebug-data-with-nan": (["quantize-debug", "--data", "{npz_nan}"], "npz_nan", 2,
                             "NaN or infinite"),
    "device-setup-nothing-to-set-up": (["device", "setup", "cpu"], None, 2, "nothing to set up"),
    "device-setup-unknown-device": (["device", "setup", "phone"], None, 2, "unknown device"),
    "device-setup-option-of-another-device": (["device", "setup", "cpu", "--cpu", "cortex-a53"],
                                              None, 2, "--cpu does not apply"),
    "zoo-show-unknown": (["zoo", "show", "alexnet"], None, 2, "no such zoo model"),
    "zoo-train-unknown": (["zoo", "train", "zoo:alexnet"], None, 2, "no such zoo model"),
    "unknown-command": (["frobnicate"], None, 2, "No such command 'frobnicate'"),
    "unknown-option": (["export", "--bogus"], None, 2, "No such option: --bogus"),
}  # fmt: skip


class Files:
    """The inputs the cases need, made on demand in the test's folder."""

    def __init__(self, tmp_path: Path, export_digits, monkeypatch) -> None:
        self.tmp, self.export, self.monkeypatch = tmp_path, export_digits, monkeypatch

    def make(self, name: str) -> str:
        return getattr(self, name)()

    def garbage_pt2(self):
        (self.tmp / "m.pt2").write_bytes(b"not a zip archive")
        return str(self.tmp / "m.pt2")

    def garbage_keras(self):
        (self.tmp / "m.keras").write_bytes(b"not a keras archive")
        return str(self.tmp / "m.keras")

    def text_file(self):
        (self.tmp / "notes.txt").write_text("hello")
        return str(self.tmp / "notes.txt")

    def evil_pickle(self):
        class Evil:
            def __reduce__(self):
                return (print, ("this ran on load",))

        path = self.tmp / "evil.pt"
        path.write_bytes(pickle.dumps({"weights": Evil()}))
        return str(path)

    def wrong_weights(self):
        import torch

        path = self.tmp / "wrong.pt"
        torch.save({"fc.weight": torch.zeros(3, 3)}, path)
        return str(path)

    def npz_no_y(self):
        path = self.tmp / "no_y.npz"
        np.savez(path, x=_digits_like())
        return str(path)

    def npz_nan(self):
        x = _digits_like()
        x[3, 2, 1] = np.nan
        return _npz(self.tmp / "nan.npz", x, np.arange(20) % 10)

    def npz_strings(self):
        return _npz(self.tmp / "strings.npz", np.array([["a"] * 8] * 8 * 20).reshape(20, 8, 8),
                    np.arange(20) % 10)  # fmt: skip

    def npz_float_labels(self):
        return _npz(self.tmp / "float_y.npz", _digits_like(), np.linspace(0, 9, 20))

    def npz_three_classes(self):
        return _npz(self.tmp / "three.npz", _digits_like(), np.arange(20) % 3,
                    class_names=np.array(["a", "b", "c"]))  # fmt: skip

    def npz_big_labels(self):
        return _npz(self.tmp / "big_y.npz", _digits_like(), np.arange(20) + 5)

    def npz_rgba(self):
        return _npz(self.tmp / "rgba.npz", _digits_like(channels=4), np.arange(20) % 10)

    def npz_mismatch(self):
        return _npz(self.tmp / "mismatch.npz", _digits_like(), np.arange(7) % 10)

    def npz_one(self):
        return _npz(self.tmp / "one.npz", _digits_like(n=1), np.array([3]))

    def fake_npz(self):
        (self.tmp / "fake.npz").write_text("not a zip")
        return str(self.tmp / "fake.npz")

    def empty_dir(self):
        (self.tmp / "empty").mkdir(exist_ok=True)
        return str(self.tmp / "empty")

    def bad_images(self):
        folder = self.tmp / "images" / "3"
        folder.mkdir(parents=True)
        (folder / "broken.png").write_bytes(b"\x89PNG not really")
        return str(self.tmp / "images")

    def blocked(self):
        (self.tmp / "blocked").write_text("a file where a folder should be")
        return str(self.tmp / "blocked")

    def onnx(self):
        return str(self.export("onnx", "fp32").path)

    def rgb16(self):
        from edgekit.export.pipeline import export_artifact
        from edgekit.sources.data import load_dataset
        from edgekit.sources.load import load_model

        source = load_model("user_models:rgb_16")
        made = export_artifact(source, load_dataset("synthetic:8", source.preprocess), "onnx",
                               "fp32", out_dir=self.tmp / "rgb16")  # fmt: skip
        return str(made.artifact.path)

    def garbage_tflite(self):
        (self.tmp / "garbage.tflite").write_bytes(bytes(range(256)) * 8)
        return str(self.tmp / "garbage.tflite")

    def garbage_onnx(self):
        (self.tmp / "garbage.onnx").write_text("this is not a protobuf, just words " * 20)
        return str(self.tmp / "garbage.onnx")

    def truncated_bare_onnx(self):
        data = self.export("onnx", "fp32").path.read_bytes()
        (self.tmp / "t.onnx").write_bytes(data[: len(data) // 3])
        return str(self.tmp / "t.onnx")

    def truncated_bare_pte(self):
        data = self.export("executorch", "fp32").path.read_bytes()
        (self.tmp / "t.pte").write_bytes(data[:4000])
        return str(self.tmp / "t.pte")

    def _graph(self, name, inputs, nodes, outputs):
        from onnx import helper

        graph = helper.make_graph(nodes, name, inputs, outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        path = self.tmp / f"{name}.onnx"
        path.write_bytes(model.SerializeToString())
        return str(path)

    def string_input(self):
        from onnx import TensorProto, helper

        value = helper.make_tensor_value_info
        return self._graph("strings", [value("text", TensorProto.STRING, [1])],
                           [helper.make_node("Identity", ["text"], ["same"])],
                           [value("same", TensorProto.STRING, [1])])  # fmt: skip

    def bool_input(self):
        from onnx import TensorProto, helper

        value = helper.make_tensor_value_info
        return self._graph("flags", [value("flag", TensorProto.BOOL, [1, 4])],
                           [helper.make_node("Not", ["flag"], ["inverse"])],
                           [value("inverse", TensorProto.BOOL, [1, 4])])  # fmt: skip

    def two_inputs(self):
        from onnx import TensorProto, helper

        value = helper.make_tensor_value_info
        return self._graph("pair", [value("a", TensorProto.FLOAT, [1, 10]),
                                    value("b", TensorProto.FLOAT, [1, 10])],
                           [helper.make_node("Add", ["a", "b"], ["sum"])],
                           [value("sum", TensorProto.FLOAT, [1, 10])])  # fmt: skip

    def dynamic_hw(self):
        from onnx import TensorProto, helper

        value = helper.make_tensor_value_info
        return self._graph("any_size", [value("image", TensorProto.FLOAT, ["n", 1, "h", "w"])],
                           [helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
                            helper.make_node("Flatten", ["pooled"], ["scores"])],
                           [value("scores", TensorProto.FLOAT, ["n", 1])])  # fmt: skip

    def three_names(self):
        (self.tmp / "three.txt").write_text("cat\ndog\nbird\n")
        return str(self.tmp / "three.txt")

    def model_toml_bad(self):
        (self.tmp / "edgekit.toml").write_text("[model]\ncolour = 'blue'\n")
        return str(self.tmp / "edgekit.toml")

    def keras_weights(self):
        (self.tmp / "weights.bin").write_bytes(b"\0" * 64)
        return str(self.tmp / "weights.bin")

    def no_manifest(self):
        (self.tmp / "bare.onnx").write_bytes(self.export("onnx", "fp32").path.read_bytes())
        return str(self.tmp / "bare.onnx")

    def _mutated(self, name, mutate):
        return _broken_copy(self.export("onnx", "fp32"), self.tmp, name, mutate=mutate)

    def manifest_garbage(self):
        path = self._mutated("garbage.onnx", None)
        Path(path + ".json").write_text("{not json")
        return path

    def manifest_no_input(self):
        return self._mutated("no_input.onnx", _set("input", KeyError))

    def manifest_bad_shape(self):
        return self._mutated("bad_shape.onnx", _set("input.shape", ["one", 1, 32, 32]))

    def manifest_empty_shape(self):
        return self._mutated("empty_shape.onnx", _set("input.shape", []))

    def manifest_turbo(self):
        return self._mutated("turbo.onnx", _set("runtime_options", {"threads": 1, "turbo": 1}))

    def onnx_fp32_copy(self):
        return self._mutated("tuned.onnx", None)

    def manifest_future(self):
        return self._mutated("future.onnx", _set("schema_version", 99))

    def manifest_coreml(self):
        return self._mutated("coreml.onnx", _set("target", "coreml"))

    def manifest_bad_pre(self):
        return self._mutated("bad_pre.onnx", _set("preprocessing.channels", "three"))

    def modified(self):
        path = self._mutated("modified.onnx", None)
        with open(path, "ab") as handle:
            handle.write(b"\0")
        return path

    def truncated_onnx(self):
        return _broken_copy(self.export("onnx", "fp32"), self.tmp, "t.onnx", truncate=4000)

    def truncated_tflite(self):
        return _broken_copy(self.export("tflite", "fp32"), self.tmp, "t.tflite", truncate=4000)

    def truncated_pte(self):
        return _broken_copy(self.export("executorch", "fp32"), self.tmp, "t.pte", truncate=4000)

    def no_adb(self):
        self.monkeypatch.setenv("PATH", str(self.tmp / "no-bin"))
        self.monkeypatch.setenv("EDGEKIT_BENCHMARK_MODEL", "/bin/true")
        return ""

    def toml_garbage(self):
        return _toml(self.tmp, "[run\nthreads = ")

    def toml_threads(self):
        return _toml(self.tmp, '[run]\nthreads = "many"\n')

    def toml_targets(self):
        return _toml(self.tmp, "[run]\ntargets = 5\n")

    def toml_unknown(self):
        return _toml(self.tmp, "[run]\ncolour = 'blue'\n")

    def toml_rounds(self):
        return _toml(self.tmp, "[run]\nrounds = -3\n")

    def run_garbage(self):
        return _run_dir(self.tmp, text="{")

    def run_no_status(self):
        return _run_dir(self.tmp, lambda p: p["rows"][0].pop("status"))

    def run_future(self):
        return _run_dir(self.tmp, lambda p: p.update(schema_version=99))

    def run_bad_latency(self):
        return _run_dir(self.tmp, lambda p: p["rows"][0].update(latency="fast"))

    def run_bad_drop(self):
        return _run_dir(self.tmp, lambda p: p["rows"][0]["accuracy"].update(drop_points="small"))

    def run_bad_memory(self):  # the report's table formats it as a number
        return _run_dir(self.tmp, lambda p: p["rows"][0]["memory"].update(process_peak_mb=[]))

    def corrupt_db(self):
        (self.tmp / "history.sqlite").write_bytes(b"this is not a database at all" * 100)
        return str(self.tmp / "history.sqlite")

    def empty_db(self):
        sqlite3.connect(self.tmp / "empty.sqlite").close()
        return str(self.tmp / "empty.sqlite")


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_its_exit_code(case, capsys, tmp_path, export_digits,
                                                 monkeypatch):  # fmt: skip
    args, needs, code, message = CASES[case]
    monkeypatch.chdir(tmp_path)  # a user's own modules sit beside their project
    files = Files(tmp_path, export_digits, monkeypatch)
    values = {name: files.make(name) for name in (needs or "").split()}
    argv = [part.format(**values) for part in args]
    if argv[0] == "export" and "-o" not in argv:
        argv += ["-o", str(tmp_path / OUT)]
    if argv[0] == "run":
        argv += ["--runs-dir", str(tmp_path / OUT), "--history", str(tmp_path / "h.sqlite")]
    before = _tree(tmp_path)
    capsys.readouterr()  # what making the case's files printed is not the command's
    result = run_cli(capsys, *argv)
    # every line on stderr but edgekit's own progress (a spinner, a timestamped step)
    said = [line for line in result.err.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert result.code == code, (case, result.code, result.err[-2000:])
    # exactly one line, edgekit's, holding the case's words and naming what is at fault: a
    # file, an option or a value the command was given
    assert len(said) == 1 and said[0].startswith("edgekit: error:"), (case, said)
    assert message in said[0], (case, said[0])
    given = argv if case == "unknown-command" else argv[1:]  # the unknown word is the command
    assert case in NAMES_NOTHING or any(name in said[0] for name in _names(given)), (
        case, said[0])  # fmt: skip
    assert "Traceback" not in result.err + result.out
    # nothing partial anywhere: a refusal writes no file at all, whole, hidden or .partial
    assert not sorted(_tree(tmp_path) - before), case


PROGRESS = re.compile(r"^(\[\d\d:\d\d:\d\d\] | {5,}\S|[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] )")
# cases whose fault is something not given, so the line can name nothing given
NAMES_NOTHING = {
    "check-no-bound": "no bound was given: the line lists the bounds there are",
    **{
        f"{command}-nothing": "nothing was given: the line says what to give"
        for command in ("audit", "bench", "check", "golden")
    },
}


def _names(tokens: list[str]) -> set[str]:
    """What a line may name to point at one of ``tokens``: a file by its name, an option with
    or without its dashes, a value as given."""
    names = set()
    for token in tokens:
        names |= {token, Path(token).name}
        if token.startswith("--"):
            names.add(token[2:])
    return names


def _tree(root: Path) -> set[str]:
    """Every file under ``root``, relative to it (the test's own caches left out)."""
    return {str(path.relative_to(root)) for path in root.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}  # fmt: skip


# commands without a case here, and why
NO_CASE_HERE = {
    "doctor": "takes no input",
    "zoo list": "takes no input",
    **{
        f"cluster {verb}": "tests/test_cluster.py gives a cluster bad input (it needs a network "
        "namespace of its own)"
        for verb in ("join", "resources", "start", "status", "stop")
    },
}


def test_every_command_of_the_app_has_a_case_or_a_reason():
    """A command added to the CLI without bad-input cases fails here, by name."""
    from edgekit.cli import commands as leaf_commands

    commands = set(leaf_commands())
    covered = {" ".join(argv[:2]) if argv[0] in ("zoo", "device") else argv[0]
               for argv, *_ in CASES.values()}  # fmt: skip
    assert sorted(commands - covered - set(NO_CASE_HERE)) == []
    assert sorted(set(NO_CASE_HERE) - commands) == []  # no reason kept for a command gone
