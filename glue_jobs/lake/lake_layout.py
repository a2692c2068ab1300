"""Where a row lands: the columns the writes add, and the per-batch values they are built from.

The contract (glue_jobs/contract/typed_contract.py) decides what a record says; this module adds what the batch knows:
- lake rows: `batch_id`, `event_date` and `event_hour` (the hour partition of event_time, in UTC);
- dead letters: `batch_id` and `ingest_date` (the UTC arrival date, or the processing date when a record
  has no arrival time).

They are added in one place (`lake_write_columns`, `dead_letter_write_columns`) with one type: the
partition date is a DATE while it is written. It names the same directory (`event_date=YYYY-MM-DD`) as the
catalog's string partition value, and the partitioned write, which sorts every row by it, compares an
int instead of a string whose sort prefix is the same for a whole month (docs/streaming-job.md,
"Benchmark history").

Dates and hours come from epoch arithmetic, not date_format: the partitions are the same whatever the
session or JVM time zone.
"""

from __future__ import annotations

from functools import cache, lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from glue_jobs.batch_constants import with_batch_constants
from glue_jobs.column_seq import ColumnSeq, select
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.schema import DEAD_LETTER_COLUMNS, DEAD_LETTER_PARTITION_COLUMNS, PARTITION_COLUMNS

MS_PER_HOUR = 3_600_000
MS_PER_DAY = 86_400_000
BATCH_ID = "_batch_id"


def hour_modulo(event_time_ms: Column, n: int) -> Column:
    """The epoch hour of epoch milliseconds modulo `n`, in [0, n) also before 1970 (an int column); with
    n=24 the UTC hour of day. (F.pmod is pyspark 3.4+; the Glue 4.0 line runs 3.3.)"""
    epoch_hour = F.floor(event_time_ms / F.lit(MS_PER_HOUR))
    return (epoch_hour - F.floor(epoch_hour / F.lit(n)) * F.lit(n)).cast("int")


def utc_date(epoch_ms: Column) -> Column:
    """The UTC calendar date (a DATE) of epoch milliseconds; null for null."""
    return F.date_add(F.lit("1970-01-01").cast("date"), F.floor(epoch_ms / F.lit(MS_PER_DAY)).cast("int"))


def partition_values(event_time_ms: Column) -> dict[str, Column]:
    """event_date (a DATE) and event_hour (0-23) of epoch milliseconds, named as PARTITION_COLUMNS."""
    partitions = {"event_date": utc_date(event_time_ms), "event_hour": hour_modulo(event_time_ms, 24)}
    if tuple(partitions) != tuple(name for name, _, _ in PARTITION_COLUMNS):
        raise AssertionError("partition columns drifted from glue_jobs.schema.PARTITION_COLUMNS")
    return partitions


def event_time_ms(table: LakeTable) -> Column:
    """The table's event time (a timestamp column) as epoch milliseconds."""
    return epoch_millis(table.event_time)


def epoch_millis(column: str) -> Column:
    """A timestamp column, by name, as epoch milliseconds."""
    return F.expr(f"unix_millis(`{column}`)")  # exact: milliseconds, whatever the session time zone


def lake_write_columns(valid: DataFrame, *, batch_id: int, table: LakeTable | None = None) -> DataFrame:
    """Valid rows (the lake columns validate() returns) -> the table's columns (default: clickstream's), in
    its order, with batch_id and the hour partition added."""
    from pyspark import SparkContext

    table = table or LakeTable.of()
    with_id = with_batch_constants(valid, {BATCH_ID: batch_id})
    return select(with_id, _lake_columns(tuple(table.column_names()), table.event_time, SparkContext._jvm))


@cache
def _lake_columns(names: tuple[str, ...], event_time: str, jvm) -> ColumnSeq:
    """`lake_write_columns`' select, built once per JVM (glue_jobs/column_seq.py)."""
    added = {"batch_id": F.col(BATCH_ID), **partition_values(epoch_millis(event_time))}
    return ColumnSeq([added[name].alias(name) if name in added else F.col(f"`{name}`") for name in names])


def dead_letter_write_columns(rejected: DataFrame, *, batch_id: int, processing_date: str) -> DataFrame:
    """Rejected rows (payload, reason, detail and the ingestion columns) -> the dead-letter columns with
    batch_id and ingest_date: the UTC arrival date, or `processing_date` (YYYY-MM-DD) without an arrival time."""
    from pyspark import SparkContext

    with_id = with_batch_constants(rejected, {BATCH_ID: batch_id})
    return select(with_id, _dead_letter_columns(processing_date, SparkContext._jvm))


@lru_cache(maxsize=4)
def _dead_letter_columns(processing_date: str, jvm) -> ColumnSeq:
    """`dead_letter_write_columns`' select for one processing date, built once per date and JVM."""
    (partition,) = (name for name, _, _ in DEAD_LETTER_PARTITION_COLUMNS)
    arrival_date = utc_date(F.expr("unix_millis(arrival_time)"))
    return ColumnSeq([
        *(F.col(BATCH_ID).alias(name) if name == "batch_id" else F.col(name) for name, _, _ in DEAD_LETTER_COLUMNS),
        F.coalesce(arrival_date, F.lit(processing_date).cast("date")).alias(partition),
    ])
