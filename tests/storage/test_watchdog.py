"""The storage's read deadlines (`_Watchdog`) across a fork: a child runs only its own."""

import os
import threading
import time

import pytest

from transcripts.storage import _WATCHDOG

pytestmark = [pytest.mark.s3]


def test_a_forked_child_never_runs_its_parents_deadlines(tmp_path):
    # A parent's read armed at the fork (the child's copy of its socket is the same
    # connection): the child must not shut it down when that deadline passes.
    fired = tmp_path / "fired"
    armed, release = threading.Event(), threading.Event()

    def parents_read() -> None:
        def late() -> None:
            with fired.open("a") as f:
                f.write(f"{os.getpid()}\n")

        with _WATCHDOG.armed(0.5, late):
            armed.set()
            release.wait(10)

    reader = threading.Thread(target=parents_read)
    reader.start()
    armed.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: a read of its own, past the parent's deadline
        code = 1
        try:
            with _WATCHDOG.armed(0.5, lambda: None) as own:
                time.sleep(2)
            code = 0 if own[0] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    release.set()
    reader.join(10)

    assert os.waitstatus_to_exitcode(status) == 0  # its own deadline fired, in time
    assert fired.read_text().split() == [str(os.getpid())]  # the parent's, in the parent only
