"""Named phase points, for fault injection in tests and for test hooks.

The kill tests run the CLI with COMPACTION_CRASH_AT=<phase>[:<n>]; the process SIGKILLs itself the
n-th time (default 1) it reaches that point, which is exactly what a lost Glue worker or a killed
job run looks like to the next run. `staging_write` is special: it arms a watcher that kills the
process while Spark is writing the staging files (as soon as the first staging entry appears).
Unset, every point is a no-op.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

CRASH_ENV = "COMPACTION_CRASH_AT"

# In the order a partition goes through them; docs/compaction.md says what recovery does after each.
PHASES = (
    "after_plan",  # journal plan.json written, nothing staged yet
    "staging_write",  # while Spark writes into staging
    "after_stage",  # staged files written and counted, staged.json not yet written
    "after_commit",  # staged.json written (commit point), nothing published
    "publish",  # after each output file moved into the partition (":n" = after the n-th)
    "after_publish",  # every output published, no input deleted
    "delete",  # after each input file deleted (":n" = after the n-th)
    "after_delete",  # every input deleted, history not yet written
    "after_history",  # history written, journal and staging not yet removed
    # The run's partitions-log steps (glue_jobs/partitions_log.py), around the partitions above:
    "log_read",  # the log's entries read, no partition compacted yet
    "log_compacted",  # every partition they name compacted, no entry advanced
    "log_advance",  # after each entry advanced (deleted or rewritten; ":n" = after the n-th)
)

LOG_PHASES = ("log_read", "log_compacted", "log_advance")  # tests/spark/test_compaction_log.py kills at these

PhaseHook = Callable[[str, dict], None]


def _kill_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class FaultInjector:
    def __init__(self, spec: str | None = None, hook: PhaseHook | None = None) -> None:
        spec = os.environ.get(CRASH_ENV, "") if spec is None else spec
        self.phase, self.occurrence = None, 1
        if spec:
            phase, _, count = spec.partition(":")
            if phase not in PHASES:
                raise ValueError(f"{CRASH_ENV}={spec!r}: phase must be one of {', '.join(PHASES)}")
            if count and (not count.isdigit() or int(count) < 1):
                raise ValueError(f"{CRASH_ENV}={spec!r}: the count after ':' must be a positive integer")
            self.phase, self.occurrence = phase, int(count or 1)
        self.hook = hook
        self._seen = 0
        self._lock = threading.Lock()

    def point(self, phase: str, **context) -> None:
        if self.hook is not None:
            self.hook(phase, context)
        if phase != self.phase:
            return
        with self._lock:
            self._seen += 1
            hit = self._seen == self.occurrence
        if hit:
            _kill_now()

    def watch_staging(self, exists: Callable[[], bool]) -> None:
        """At `staging_write`: kill the process from a watcher thread once staging output exists."""
        if self.hook is not None:
            self.hook("staging_write", {})
        if self.phase != "staging_write":
            return

        def watch() -> None:
            while not exists():
                time.sleep(0.01)
            _kill_now()

        threading.Thread(target=watch, name="crash-during-staging", daemon=True).start()
