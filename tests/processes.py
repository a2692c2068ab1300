"""Ending a process group a test started (`start_new_session=True`), the way Glue loses a run: SIGKILL to the whole
group, so the JVM the driver started dies with it."""
from __future__ import annotations

import os
import signal
import subprocess


def kill_group(process: subprocess.Popen, timeout: float = 60) -> int:
    """SIGKILL the process group led by `process`, then reap the leader; returns its exit code.

    A group whose every member has already exited (a crash point that killed the driver after its JVM had gone) is not
    an error: `killpg` then raises ProcessLookupError (ESRCH, kill(2)), which once failed a test that had nothing left
    to kill."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return process.wait(timeout=timeout)
