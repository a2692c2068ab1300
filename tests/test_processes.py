"""kill_group, which every kill test ends its runner with: a group already gone is no error, and a group whose leader
exited but whose child (the JVM) lives is ended whole."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.processes import kill_group


def test_a_group_whose_members_all_exited_is_no_error():
    process = subprocess.Popen(["sh", "-c", "exit 3"], start_new_session=True)
    assert process.wait(timeout=30) == 3  # reaped, nothing left in its group: killpg would raise ESRCH
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)
    assert kill_group(process) == 3


def test_a_child_outliving_its_leader_is_killed_with_the_group():
    process = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; exit 0"], start_new_session=True,
                               stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    assert process.wait(timeout=30) == 0
    os.killpg(process.pid, 0)  # the child still holds the group
    kill_group(process)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"sleep {child} survived kill_group")
