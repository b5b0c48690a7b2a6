"""Runs on the board (stdlib, numpy and the runtimes only): the guest worker of the emulated
device (``guest.py``, the host worker's protocol), ended as soon as its SSH channel closes, so a
run that is interrupted, times out or loses its connection leaves nothing running there.

    python launcher.py TOKEN      (pidfile: pids/TOKEN, removed on the way out)"""

import atexit
import contextlib
import os
import select
import sys
import threading


def end_with_the_channel(pidfile: str) -> None:
    """sshd closes the worker's stdin when the channel ends (Ctrl-C, a timeout, a dropped
    connection): a hang-up on stdin, which poll reports even while a block is running and
    without reading a byte of the commands."""
    watch = select.poll()
    watch.register(sys.stdin.fileno(), 0)  # POLLHUP and POLLERR are reported unasked
    while True:
        for _fd, event in watch.poll():
            if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                _remove(pidfile)
                os._exit(0)


def _remove(pidfile: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(pidfile)


def main() -> None:
    pidfile = os.path.join("pids", sys.argv[1])
    atexit.register(_remove, pidfile)
    threading.Thread(target=end_with_the_channel, args=(pidfile,), daemon=True).start()
    from edgekit.common.shutdown import collect_once_at_exit

    collect_once_at_exit()
    import guest

    guest.main()


if __name__ == "__main__":
    main()
