"""An edge board on loopback, driven through the CLI as a user drives one: run by
tests/test_board.py as ``python scripts/loopback_board.py DIR -- python tests/board_scenario.py
OUT``, so it runs in a network namespace of its own beside a Debian sshd whose login runs an
aarch64 CPython under QEMU user mode (scripts/loopback_board.py). Each step's exit status, its
edgekit lines and what the board held afterwards go to OUT/scenario.json.

The board is emulated: its outputs are real aarch64 outputs, its speed is QEMU's. The latency
settings are plumbing's (a few short rounds), not a measurement's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from cli_helpers import EDGEKIT, QUICK_BENCH, copy_artifact
from sklearn.datasets import load_digits

BOARD = "ssh://board"
QUICK = [*QUICK_BENCH, "--sessions", "2"]
# one session where the step tests plumbing, not sessions: each opens every worker on QEMU again
ONE_SESSION = [*QUICK_BENCH, "--sessions", "1"]
CONFIG_DIR = Path(os.environ["EDGEKIT_SSH_CONFIG"]).parent  # the board's folder
BOARD_HOME = CONFIG_DIR / "home" / ".cache" / "edgekit-board"  # the board's work directory
SSHD_CONFIG = CONFIG_DIR / "sshd_config"


def workers_on_board() -> list[str]:
    """Command lines of the edgekit workers running on the board (the board is this machine's
    loopback: its processes are this namespace's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        program = command.split(" ", 1)[0]
        # the board's side (qemu running its Python), not this side's ssh client
        if "launcher.py" in command and ("qemu" in program or "python" in program):
            found.append(command)
    return found


def step(name: str, args: list[str], out: dict, **kw) -> subprocess.CompletedProcess:
    started = time.perf_counter()
    done = subprocess.run([EDGEKIT, *args], capture_output=True, text=True, check=False, **kw)
    out[name] = {
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr[-6000:],
        "seconds": round(time.perf_counter() - started, 1),
        "workers_after": workers_on_board(),
    }
    return done


def interrupted(name: str, args: list[str], out: dict, when, then) -> dict:
    """Start ``edgekit args``; once ``when(stderr lines so far)`` holds, ``then(process)``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [EDGEKIT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    fired = threading.Event()

    def watch() -> None:
        while process.poll() is None:
            if when(lines):
                fired.set()
                then(process)
                return
            time.sleep(0.2)

    threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True).start()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    stdout = process.stdout.read()
    process.wait()
    watcher.join(timeout=30)
    out[name] = {
        "rc": process.returncode,
        "stdout": stdout[-6000:],
        "stderr": "".join(lines)[-6000:],
        "fired": fired.is_set(),
        "seconds": round(time.perf_counter() - started, 1),
        "workers_after": workers_on_board(),
    }
    return out[name]


def main(out_dir: Path) -> None:
    out: dict = {}
    try:
        scenario(out_dir, out)
    finally:
        (out_dir / "scenario.json").write_text(json.dumps(out, indent=1, default=str))


def scenario(out_dir: Path, out: dict) -> None:
    os.chdir(out_dir)
    (out_dir / "plumbing.toml").write_text("[run]\nnoise_guard = false\n")
    # 240 of the digits (120 evaluated): the board's Python is emulated, and every image costs
    digits = load_digits()
    small = out_dir / "digits240.npz"
    np.savez(small, x=(digits.images[:240] / 16.0).astype(np.float32)[..., None],
             y=digits.target[:240], class_names=[str(d) for d in range(10)])  # fmt: skip
    plumbing = ["--config", str(out_dir / "plumbing.toml")]
    step("setup", ["device", "setup", BOARD], out)
    step("setup_again", ["device", "setup", BOARD], out)
    step("doctor", ["doctor", "--device", BOARD, "--json"], out)
    run = ["run", *plumbing, "--device", BOARD, "--recipe", "int8", "--data", str(small),
           "--no-profile", "--runs-dir", "runs", *QUICK]  # fmt: skip
    step("run", [*run, "--target", "all", "--name", "first"], out)
    step("run_again", [*run, "--target", "tflite", "--name", "second"], out)
    artifacts = sorted((out_dir / "runs").glob("*-first/artifacts"))[0]
    tflite = str(artifacts / "digits-mobilenet-int8.tflite")
    onnx = str(artifacts / "digits-mobilenet-int8.onnx")
    step("eval", ["eval", tflite, "--device", BOARD, "--data", str(small), "--json"], out)
    quick_data = ["--data", "synthetic:32"]
    step("check", ["check", tflite, "--device", BOARD, *quick_data, "--max-drop", "100"], out)
    step("bench", ["bench", tflite, onnx, "--device", BOARD, "--json", *ONE_SESSION], out)
    # golden vectors made here, checked on the board (its outputs against the host's)
    for suffix in ("tflite", "onnx", "pte"):
        made = str(artifacts / f"digits-mobilenet-int8.{suffix}")
        step(f"golden_{suffix}", ["golden", made, "-o", f"bundle-{suffix}", "--data", str(small),
                                  "--count", "8", "--spread-on", ""], out)  # fmt: skip
        step(f"golden_check_{suffix}", ["golden", "--check", f"bundle-{suffix}", "--device", BOARD,
                                        "--json"], out)  # fmt: skip

    tuned = out_dir / "tuned"  # tune writes its winner into the manifest: a copy of the file
    tuned.mkdir()
    model = copy_artifact(Path(tflite), tuned, "model.tflite")
    step("tune", ["tune", str(model), "--device", BOARD, "--budget-s", "15",
                  "--only", "threads", "--no-noise-guard", "--json"], out)  # fmt: skip
    out["tune"]["manifest"] = json.loads(Path(f"{model}.json").read_text())

    # faults, as a board on a desk has them
    step("unreachable", ["eval", tflite, "--device", "ssh://127.0.0.1:1"], out)
    other_key = out_dir / "other_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True
    )
    # a stranger: the board's address and host key, and a key the board does not know
    port = int(SSHD_CONFIG.read_text().split(":")[1].split()[0])
    stranger_config = out_dir / "stranger_ssh_config"
    stranger_config.write_text(f"Host *\n  UserKnownHostsFile {CONFIG_DIR / 'known_hosts'}\n")
    boards = out_dir / "boards.toml"
    boards.write_text(
        f'[devices.stranger]\nhost = "127.0.0.1"\nport = {port}\nuser = "root"\n'
        f'identity_file = "{other_key}"\nssh_config = "{stranger_config}"\n\n'
        '[devices.bare]\nhost = "board"\npython = "/opt/no-such/python3"\n'
    )
    step("refused", ["eval", tflite, "--device", "stranger", "--config", str(boards)], out)
    step("no_python", ["eval", tflite, "--device", "bare", "--config", str(boards)], out)
    hang_env = dict(os.environ, EDGEKIT_TEST_CRASH="hang-in-block")
    hang = ["bench", tflite, "--device", BOARD, "--timeout", "10", *ONE_SESSION]
    step("hang", hang, out, env=hang_env)

    def ctrl_c(process: subprocess.Popen) -> None:
        time.sleep(2.0)  # both workers are on the board, timing
        out["ctrl_c_sent"] = time.perf_counter()
        os.killpg(process.pid, signal.SIGINT)

    interrupted(
        "ctrl_c", ["bench", tflite, onnx, "--device", BOARD, "--rounds", "50", "--min-seconds",
                   "1", "--precision", "off", "--sessions", "3"], out,
        lambda lines: len(workers_on_board()) >= 2, ctrl_c,
    )  # fmt: skip
    gone = time.perf_counter()
    while workers_on_board() and time.perf_counter() - gone < 10:
        time.sleep(0.1)
    out["ctrl_c"]["board_clear_after_s"] = round(time.perf_counter() - out.pop("ctrl_c_sent"), 2)

    sshd = int((CONFIG_DIR / "sshd.pid").read_text())

    def pull_the_cable(process: subprocess.Popen) -> None:
        # the listener and every session it serves: the board is gone mid-run
        subprocess.run(["pkill", "-KILL", "-P", str(sshd)], check=False)
        os.kill(sshd, signal.SIGKILL)

    interrupted(
        "dropped", [*run, "--target", "tflite", "--threads", "1,2", "--name", "dropped"], out,
        lambda lines: any(f"on {BOARD}, 2 thread(s)" in line for line in lines), pull_the_cable,
    )  # fmt: skip
    subprocess.run(["/usr/sbin/sshd", "-f", str(SSHD_CONFIG), "-E", str(CONFIG_DIR / "sshd.log")],
                   check=True)  # fmt: skip
    time.sleep(0.5)
    dropped = sorted((out_dir / "runs").glob("*-dropped"))[0]
    out["dropped"]["rows"] = json.loads((dropped / "results.json").read_text())["rows"]
    step("resume", ["run", "--resume", str(dropped)], out)
    out["resume"]["rows"] = json.loads((dropped / "results.json").read_text())["rows"]
    out["first_rows"] = json.loads(
        (sorted((out_dir / "runs").glob("*-first"))[0] / "results.json").read_text()
    )["rows"]
    os.kill(int((CONFIG_DIR / "sshd.pid").read_text()), signal.SIGTERM)  # the one started here


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
