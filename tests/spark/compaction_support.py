"""Running the compaction CLI in its own process, to be SIGKILLed at a phase (compaction/faults.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from compaction.faults import CRASH_ENV
from tests.processes import kill_group

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_compaction_killed_at(spec: str, *args: str) -> str:
    """`python -m compaction run-local <args>` with COMPACTION_CRASH_AT=spec; asserts it was SIGKILLed and returns
    what it printed (stdout and stderr)."""
    env = {**os.environ, CRASH_ENV: spec, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    # The tests' lakes are clickstream's unless they say otherwise (the command itself has no default).
    cmd = [sys.executable, "-m", "compaction", "run-local", *(() if "--dataset" in args else ("--dataset", "clickstream")), *args]
    # Own process group, so the JVM the killed driver started dies with it, like a lost Glue run.
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        kill_group(proc)
    assert proc.returncode == -signal.SIGKILL, output.decode(errors="replace")[-3000:]
    return output.decode(errors="replace")
