"""Named points of a micro-batch where the kill tests crash the job (SIGKILL to its own process), as a lost Glue
driver would: `STREAMLAKE_CRASH_AT=<point>:<batch id>`. Unset (always, on Glue), every point is a no-op.
Compaction has its own (compaction/faults.py)."""

from __future__ import annotations

import os
import signal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

CRASH_ENV = "STREAMLAKE_CRASH_AT"
# Tests: a key value whose lake row no write takes (the write raises for it, as a record no retry can write would).
UNWRITABLE_ENV = "STREAMLAKE_UNWRITABLE"
POINTS = (
    "after_isolation",  # a failed write's unwritable records found (glue_jobs/lake/unwritable.py), nothing written again yet
    "after_lake_commit",  # the lake rows committed (an Iceberg table's snapshot), dead letters not yet written (a Parquet lake: lake rows staged, dead letters staged at most)
    "after_publish",  # dead letters published, the commit marker not yet written
    "after_route",  # a routed source: one dataset's part committed, the next not started (glue_jobs/routed_batch.py)
)


def armed() -> tuple[str, int] | None:
    """The (point, batch id) STREAMLAKE_CRASH_AT names, or None; a value of another form is refused."""
    spec = os.environ.get(CRASH_ENV, "")
    if not spec:
        return None
    point, _, batch = spec.partition(":")
    if point not in POINTS or not batch.isdigit():
        raise ValueError(f"{CRASH_ENV}={spec!r}: expected <point>:<batch id> with a point among {', '.join(POINTS)}")
    return point, int(batch)


def reached(point: str, batch_id: int) -> None:
    """SIGKILL this process when STREAMLAKE_CRASH_AT names this point and batch."""
    if point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}")
    if armed() == (point, int(batch_id)):
        os.kill(os.getpid(), signal.SIGKILL)


def unwritable(rows: DataFrame, key: str) -> DataFrame:
    """`rows` whose write raises (Spark's raise_error) for the row whose `key` is STREAMLAKE_UNWRITABLE; unset, `rows`."""
    value = os.environ.get(UNWRITABLE_ENV)
    if not value:
        return rows
    refused = F.raise_error(F.lit(f"{UNWRITABLE_ENV}: the row with {key} {value} cannot be written"))
    return rows.withColumn(key, F.when(F.col(key).cast("string") == value, refused).otherwise(F.col(key)))
