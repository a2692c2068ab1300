"""A valid record the lake write cannot take, found and dead-lettered so its source goes on.

A batch whose write fails is retried from scratch by the engine, and fails again if a record in it can never be
written (Spark 3.x refused ancient dates so before CALENDAR_SETTINGS, glue_jobs/session.py): the source would be stuck
on that batch for good. So when a batch's write raises, `isolate` bisects the batch's valid rows by row id, writing
each half as a probe into the batch's staging (`<lake staging>/_probe`, removed with the staging), down to the single
rows whose write fails. Those rows' keys (every copy) leave the lake rows and become dead letters, reason
`unwritable`, detail the error's first line, payload the record as sent (the validated batch again: its plan reads
the source once more, on this rare path only). The batch then writes as usual.

Not a record's fault, and so raised as before (the batch fails and is retried: nothing lost, nothing stored):
- the whole batch writes in the first probe (a transient failure: the batch is written again, no dead letter);
- no probe writes at all (the sink itself fails: S3 denied, a full disk), so no row can be blamed;
- more than MAX_UNWRITABLE rows fail alone (a systematic failure is a bug to see, not data to dead-letter);
- the query is being stopped (`query_stopping`): nothing is probed, so a stop is not held up by a search for a record
  nobody blames; the batch is raised as `QueryStopped`, not committed, and replayed when the query starts again.
Probes are Parquet writes; a failure only the Iceberg commit makes (not the files) is not isolated (unverified that
one exists).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from glue_jobs.contract import UNWRITABLE

MAX_UNWRITABLE = 100
# What a write raises when its query is being stopped. Spark's MicroBatchExecution.stop() (3.3 to 4.x) cancels the
# query's job group (`cancelJobGroup(runId.toString)`: the running job fails, "Job <n> cancelled part of cancelled job
# group ...") and then interrupts the query's thread (`interruptAndAwaitExecutionThreadTermination`: a driver waiting on
# a broadcast or a file raises one of the interruptions below).
INTERRUPTIONS = frozenset({"java.lang.InterruptedException", "java.io.InterruptedIOException",
                           "java.nio.channels.ClosedByInterruptException"})
# What Spark 3.3 and 3.5 count as a stop when a Python foreachBatch function fails: py4j hands the JVM the Python error
# as text only (py4j clientserver.py `_call_proxy` sends `traceback.format_exc()` unless propagate_java_exceptions is set,
# and pyspark's java_gateway.py does not set it), as a Py4JException, and StreamExecution.isInterruptionException matches
# that text with PROXY_ERROR: "py4j.protocol.Py4JJavaError: An error occurred while calling" + ".+(\r\n|\r|\n): " + one
# of INTERRUPTIONS (apache/spark sql/core/.../execution/streaming/StreamExecution.scala, v3.3.4 and v3.5.4; Spark 4.1's,
# in streaming/runtime/, also accepts a cancelled job group's SparkException text). A cancelled job's error ("Job <n>
# cancelled part of cancelled job group") does not match before 4.1, so a stop whose cancellation reached the batch
# before its interrupt ended the query with that error. Spark only asks when its query's state is TERMINATED, which
# stop() sets first (isInterruptedByStop), so a job cancelled by other hands still fails the query.
STOP_TEXT = "py4j.protocol.Py4JJavaError: An error occurred while calling the batch function\n: java.lang.InterruptedException"
log = logging.getLogger("glue_jobs.lake.unwritable")


class QueryStopped(RuntimeError):
    """The batch failed because its query is stopping (`query_stopping`), raised with STOP_TEXT in its message so that
    Spark ends the query as stopped, not failed, whichever of the stop's cancellation or interrupt reached the batch
    first. The batch is not committed; it replays when the query starts again."""

    def __init__(self, batch_id: int, error: BaseException) -> None:
        super().__init__(f"batch {batch_id}: its Spark job was cancelled or interrupted, as a query's stop does ({STOP_TEXT}: "
                         f"{first_line(error)})")
        self.error = error  # what the stop made the batch raise (not chained: stops_seen says why)


def first_line(error: BaseException) -> str:
    """The first line of what caused the error: the root cause of its Java exception when it has one (Spark 3.3 raises a
    Py4JJavaError whose own message is only "Job aborted."; later lines wrap it in a captured exception, `_origin`),
    else the first line of its text that says something."""
    java = _java_side(error)
    try:
        while java is not None and java.getCause() is not None:
            java = java.getCause()
        if java is not None:
            return f"{java.getClass().getName()}: {java.getMessage()}".splitlines()[0][:500]
    except Exception:  # noqa: BLE001 - a message is wanted, not a second failure; the text below says enough
        pass
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("An error occurred while calling", "Traceback"))]
    return (useful or lines or [type(error).__name__])[0][:500]


def _java_side(error: BaseException):
    """The Java exception behind a pyspark error: Py4JJavaError's `java_exception` (Spark 3.3), a captured exception's
    `_origin` (later lines); None for an error raised in Python."""
    return getattr(error, "java_exception", None) or getattr(error, "_origin", None)


def query_stopping(error: BaseException) -> bool:
    """Whether `error` is how a stopped query fails its batch (INTERRUPTIONS, or a Spark job cancelled), anywhere in its
    Java exception's chain of causes. A job cancelled by other hands (killed in Spark's UI) counts too: no record is to
    blame for it either, and the batch fails and replays as it did before records were isolated. Anything else, or an
    error without a Java side, is not."""
    java = _java_side(error)
    for _ in range(50):  # a cause chain is short; this bounds a cyclic one
        if java is None:
            return False
        try:
            name, message = str(java.getClass().getName()), str(java.getMessage() or "")
            if name in INTERRUPTIONS or (name == "org.apache.spark.SparkException" and " cancelled " in f" {message} "):
                return True
            java = java.getCause()
        except Exception:  # noqa: BLE001 - an answer is wanted, not a second failure: not known to be a stop
            return False
    return False


@contextmanager
def stops_seen(batch_id: int, source_name: str) -> Iterator[None]:
    """Around a batch function's body: an error `query_stopping` recognises leaves as QueryStopped (logged once, the
    batch named); every other error leaves as it came."""
    try:
        yield
    except Exception as error:
        if not query_stopping(error):
            raise
        # Also a job cancelled by other hands (Spark's UI): that query fails, and this line says what a stop would mean.
        log.warning("batch %s of %s: its Spark job was cancelled or interrupted, as a query's stop does (%s): not committed, "
                    "it replays when the query starts again", batch_id, source_name, first_line(error))
        # Not chained: Spark 4.1's pattern (calling((.|\r\n|\r|\n)*)(names)) recurses per character after the first
        # "calling" it finds, and asked about the chained traceback (the cancelled job's Java stack trace in it) it
        # overflowed the stack (StackOverflowError, seen on 4.1.1); alone, this error's text ends with STOP_TEXT.
        raise QueryStopped(batch_id, error) from None


def bisect(row_ids: list[int], probe: Callable[[int, int], None]) -> tuple[list[int], BaseException | None]:
    """The row ids whose write fails alone, and the last probe error; ([], None) when every row writes in one probe.
    `probe(low, high)` writes the rows with ids in [low, high] and raises when the write fails. Raises RuntimeError
    when no probe wrote (nothing to blame on a row) or more than MAX_UNWRITABLE rows fail."""
    failing: list[int] = []
    state = {"wrote": 0, "error": None}

    def search(start: int, end: int) -> None:
        try:
            probe(row_ids[start], row_ids[end - 1])
            state["wrote"] += 1
            return
        except Exception as error:  # noqa: BLE001 - a probe's failure is what is searched for
            state["error"] = error
        if end - start == 1:
            failing.append(row_ids[start])
            if len(failing) > MAX_UNWRITABLE:
                raise RuntimeError(f"more than {MAX_UNWRITABLE} rows fail to write alone: not a record's fault")
            return
        middle = (start + end) // 2
        search(start, middle)
        search(middle, end)

    if row_ids:
        search(0, len(row_ids))
    if failing and not state["wrote"]:
        raise RuntimeError("no probe wrote: the failure is not a record's")
    return failing, state["error"]


def dead_letters_of(validated: DataFrame, key: tuple[str, ...], hashes: tuple[int, ...], detail: str) -> DataFrame:
    """The valid records of the batch whose key hashes are `hashes`, as dead letters before their write-time columns
    (lake_layout.dead_letter_write_columns), reason `unwritable`."""
    hashed = F.xxhash64(*(F.col(f"`{name}`") for name in key))  # packed_batch's _KEY
    rows = validated.filter(F.col("reason").isNull() & hashed.isin(list(hashes)))
    return rows.select("payload", F.lit(UNWRITABLE).alias("reason"), F.lit(detail).alias("detail"), "source",
                       "source_partition", "source_offset", "arrival_time")


def isolate(batch, batch_id: int, error: BaseException, probe: Callable[[int, int], None]) -> tuple[tuple[int, ...], int, str]:
    """(the key hashes of the rows no write takes, their valid copies, the dead letters' detail) (see the module doc), or
    ((), 0, "") when the batch writes now; raises `error` when the failure is not a record's. `probe(low, high)` writes
    the lake rows with row ids in [low, high] (raising on failure)."""
    if query_stopping(error):
        raise error  # MicroBatchWriter raises it as QueryStopped
    log.warning("batch %s: the write failed (%s); looking for records no retry can write", batch_id, first_line(error))
    try:
        failing, last = bisect(batch.valid_row_ids(), probe)
    except RuntimeError as why:
        log.error("batch %s: %s; the batch fails as it did", batch_id, why)
        raise error from None
    if not failing:
        log.warning("batch %s: every row writes now: the failure was not a record's", batch_id)
        return (), 0, ""
    hashes, copies = batch.key_hashes(failing)
    detail = f"the lake write fails for this record alone (no retry can write it): {first_line(last)}"
    log.error("batch %s: %s record(s) no write takes: dead letters, reason %s: %s", batch_id, copies, UNWRITABLE, detail)
    return hashes, copies, detail
