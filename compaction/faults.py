"""Named phase points, for fault injection in tests and for test hooks.

The kill tests run the CLI with COMPACTION_CRASH_AT=<phase>[:<n>]; the process SIGKILLs itself the
n-th time (default 1) it reaches that point, which is exactly what a lost Glue worker or a killed
job run looks like to the next run. `staging_write` is special: it arms a watcher that kills the
process while Spark is writing the staging files (as soon as the first staging entry appears).
Unset, every point is a no-op.

The check tests arm a bug instead (COMPACTION_BUG=<bug>, or FaultInjector(bug=...)): a named transform bug in the
rows compaction writes to staging (`staged_rows`), or, for an Iceberg dataset, a faulty commit right after Iceberg's
rewrite (`iceberg_commit`, standing in for a buggy rewrite). Each must stop the partition or the table's maintenance
with its inputs intact (compaction/verify.py, compaction/iceberg_verify.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

CRASH_ENV = "COMPACTION_CRASH_AT"
BUG_ENV = "COMPACTION_BUG"
# drop_column: a column written away; drop_rows: some keys' rows lost; null_key: some rows' key nulled.
BUGS = ("drop_column", "drop_rows", "null_key")

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
    # The run's partitions-log steps (glue_jobs/lake/partitions_log.py), around the partitions above:
    "log_read",  # the log's entries read, no partition compacted yet
    "log_compacted",  # every partition they name compacted, no entry advanced
    "log_advance",  # after each entry advanced (deleted or rewritten; ":n" = after the n-th)
)

LOG_PHASES = ("log_read", "log_compacted", "log_advance")  # tests/spark/test_compaction_log.py kills at these

PhaseHook = Callable[[str, dict], None]


def _kill_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def armed_bug(bug: str | None = None) -> str | None:
    """The bug to inject: `bug`, else COMPACTION_BUG; None when neither names one. ValueError for an unknown name."""
    bug = os.environ.get(BUG_ENV, "") if bug is None else bug
    if bug and bug not in BUGS:
        raise ValueError(f"{BUG_ENV}={bug!r}: the bug must be one of {', '.join(BUGS)}")
    return bug or None


def _victim(table) -> str:
    """The column a bug drops or nulls: the first data column that is neither a key field nor the event time."""
    return next(name for name, _ in table.data_columns() if name not in (*table.key, table.event_time))


def staged_rows(bug: str, frame, table):
    """`frame` (the rows compaction is about to stage) with `bug` in it."""
    from pyspark.sql import functions as F

    key = [F.col(f"`{k}`") for k in table.key]
    some = F.xxhash64(*key) % 2 == 0  # about half the keys, the same ones every time
    if bug == "drop_column":
        return frame.drop(_victim(table))
    if bug == "drop_rows":
        return frame.where(~some)
    return frame.withColumn(table.key[0], F.when(some, F.lit(None)).otherwise(key[0]))


def iceberg_commit(bug: str, spark, target, table) -> None:
    """Commit `bug` to an Iceberg dataset's table (target: glue_jobs.lake.iceberg_lake.IcebergTarget), as a faulty rewrite
    would leave it: the table's rows overwritten by themselves with a column's values gone (a rewritten file without
    the column reads as nulls), about half the keys' rows left out, or their key nulled. An overwrite, not UPDATE or
    DELETE: Spark 3.5 does not plan an UPDATE of a table with `write.spark.accept-any-schema` (the lake tables'
    property: glue_jobs/lake/iceberg_lake.py), "UPDATE TABLE is not supported temporarily"."""
    from pyspark.sql import functions as F

    from compaction.iceberg_verify import MAINTENANCE_PROPERTY

    rows = spark.table(target.name)
    if bug == "drop_column":
        victim = _victim(table)
        faulty = rows.withColumn(victim, F.lit(None).cast(rows.schema[victim].dataType))
    else:
        faulty = staged_rows(bug, rows, table)
    # marked as maintenance's own commit: it stands in for a buggy rewrite
    faulty.writeTo(target.name).option(f"snapshot-property.{MAINTENANCE_PROPERTY}", f"bug:{bug}").overwrite(F.lit(True))


class FaultInjector:
    def __init__(self, spec: str | None = None, hook: PhaseHook | None = None, bug: str | None = None) -> None:
        self.bug = armed_bug(bug)
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

    def staged(self, frame, table):
        """The rows to write to staging: `frame`, or with the armed bug in it (tests only)."""
        return frame if self.bug is None else staged_rows(self.bug, frame, table)

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
