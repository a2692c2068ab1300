"""A dataset's lake as an Apache Iceberg table (`"table_format": "iceberg"` in dataset.json): the batch writer's
lake step when the table is Iceberg. Dead letters, the commit marker and the checkpoint stay as they are
(glue_jobs/commit/__init__.py); only the lake rows go through Iceberg's commit instead of staging and publishing.

Exactly once (DESIGN invariant 1): each append records `streamlake.batch` = `<source>:<stream id>:<batch id>` in
its snapshot summary (Iceberg's `snapshot-property.<key>` write option). A replayed batch first looks for its tag
among the table's snapshots: found, the rows were committed by the attempt that crashed, nothing is appended and
the recorded `added-records` is what the batch wrote. Data files written by an attempt that crashed before its
commit belong to no snapshot: readers never see them, and `remove_orphan_files` deletes them (docs/iceberg.md).

Each key once per dataset and hour: rows whose key is already in the table for the same hour of event time are
left out of the append (an anti join over the hours the batch touches) and count as duplicates collapsed, as the
Parquet lake's compaction would have collapsed them.

The table is partitioned by `hours(<event time>)` and carries the Parquet lake's columns (event_date and
event_hour included, so queries read the same either way); a newer schema version's fields reach it with the first
append that carries them (ACCEPT_ANY_SCHEMA below). `ensure_table` creates it when missing (Spark's
`CREATE TABLE IF NOT EXISTS ... USING iceberg`), in the Glue Data Catalog on AWS and in the local JDBC catalog.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from glue_jobs.lake.lake_layout import MS_PER_HOUR, event_time_ms
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.survivors import content_hash
from glue_jobs.observed import observed as observed_values
from glue_jobs.observed import row_count
from glue_jobs.schema import INGESTION_COLUMNS, PARTITION_COLUMNS
from glue_jobs.session import session_conf

BATCH_PROPERTY = "streamlake.batch"
# Schema evolution in the job: an append whose rows carry a field the table lacks (a new optional field of a newer
# registry version, at any depth) adds it to the table in the same commit. Iceberg's Spark writes: the table property
# `write.spark.accept-any-schema` and the write option `merge-schema` (iceberg.apache.org "Spark Writes", "Schema
# Merge"); tested with a field inside a list's element struct on the runtime of each Glue line: 1.0.0 (Glue 4.0,
# Spark 3.3), 1.7.1 (5.0, Spark 3.5), 1.11.0 (Spark 4.1) (tests/spark/test_iceberg_lines.py, test_iceberg_lake.py).
ACCEPT_ANY_SCHEMA = "write.spark.accept-any-schema"
CHECK_ORDERING = "spark.sql.iceberg.check-ordering"
ADAPTIVE = "spark.sql.adaptive.enabled"
# What an append sets for its duration (append_batch says why).
APPEND_SETTINGS = {CHECK_ORDERING: "false", ADAPTIVE: "false"}
# Metadata growth bounded: every commit writes a metadata.json; past this many earlier versions the oldest is
# deleted with the next commit (Iceberg table properties `write.metadata.delete-after-commit.enabled`,
# `write.metadata.previous-versions-max`). Snapshots and manifests are bounded by the hourly maintenance.
METADATA_LIMITS = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "100"}
_HOUR = "_streamlake_hour"
_HELD = "_streamlake_held"  # the table's side of append_batch's join: the key is in the table for the hour
_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class IcebergTarget:
    """Where an Iceberg dataset lives: `<catalog>.<namespace>.<table>` as Spark names it."""

    catalog: str
    namespace: str
    table: str
    location: str | None = None  # where the table is created (None: the catalog's warehouse decides)

    def __post_init__(self) -> None:
        bad = [part for part in (self.catalog, self.namespace, self.table) if not _PART.match(part)]
        if bad:
            raise ValueError(f"Iceberg table name parts must be identifiers (letters, digits, _): {bad}")

    @property
    def name(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.table}"


def _utc(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)


def batch_tag(source_name: str, stream_id: str, batch_id: int) -> str:
    """The snapshot summary value that marks a batch's append (see the module doc)."""
    return f"{source_name}:{stream_id}:{int(batch_id)}"


def table_ddl(table: LakeTable, target: IcebergTarget) -> str:
    """CREATE TABLE IF NOT EXISTS for the dataset: the lake's columns, partitioned by the hour of event time."""
    columns = ", ".join(f"`{name}` {ddl}" for name, ddl in table.data_columns() + table.partition_columns())
    if target.location is not None and "'" in target.location:
        raise ValueError(f"table location {target.location!r} has a quote")
    location = "" if target.location is None else f"LOCATION '{target.location}' "
    settings = {"format-version": "2", ACCEPT_ANY_SCHEMA: "true", **METADATA_LIMITS}
    properties = ", ".join(f"'{key}'='{value}'" for key, value in settings.items())
    return (f"CREATE TABLE IF NOT EXISTS {target.name} ({columns}) USING iceberg "
            f"PARTITIONED BY (hours(`{table.event_time}`)) {location}TBLPROPERTIES ({properties})")


def ensure_table(spark, table: LakeTable, target: IcebergTarget) -> None:
    """The namespace and the table, created when missing; an existing table is left as it is."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {target.catalog}.{target.namespace}")
    spark.sql(table_ddl(table, target))


def committed_rows(spark, target: IcebergTarget, tag: str) -> int | None:
    """The rows the snapshot tagged `tag` added, or None when no snapshot carries the tag (the batch's lake rows
    were never committed, or their snapshot has expired: a replay that late is appended again and its rows are
    left out by append_batch's key-and-hour check, as duplicates)."""
    found = (spark.table(f"{target.name}.snapshots")
             .where(F.col("summary").getItem(BATCH_PROPERTY) == F.lit(tag))
             .select(F.col("summary").getItem("added-records").alias("rows")).collect())
    if not found:
        return None
    return sum(int(row["rows"] or 0) for row in found)


def existing_keys(spark, table: LakeTable, target: IcebergTarget, low_ms: int, high_ms: int) -> DataFrame:
    """The keys the table holds with event times in [low_ms, high_ms), with their epoch hour. The bounds are
    timestamp literals on the event-time column itself, which Iceberg pushes down to its hours() partitions: only
    the hours a batch touches are read, however large the table grows (a filter on unix_millis(<column>) is not
    pushed down and read every file)."""
    event_time = F.col(f"`{table.event_time}`")
    return (spark.table(target.name)
            .where((event_time >= F.lit(_utc(low_ms))) & (event_time < F.lit(_utc(high_ms))))
            .select(*(F.col(f"`{k}`") for k in table.key), F.floor(event_time_ms(table) / F.lit(MS_PER_HOUR)).alias(_HOUR)))


class Appended(NamedTuple):
    """What append_batch did: the rows it appended, and the epoch hours (event time) of the rows it left out because
    the table held their key for the hour already: the only hours differing_from_table has to read."""

    rows: int
    held_hours: tuple[int, ...]


def append_batch(table: LakeTable, target: IcebergTarget, rows: DataFrame, tag: str,
                 event_bounds_ms: tuple[int | None, int | None]) -> Appended:
    """Append a batch's lake rows (one per key, glue_jobs/lake/packed_batch.py) in one Iceberg commit tagged `tag`,
    leaving out keys the table holds already for the same hour. `event_bounds_ms`: the earliest and latest event time
    of the rows (the batch's counts already hold them: no pass over the rows here).

    The rows are joined to the table's keys of those hours (left outer, the table's side marked) rather than anti
    joined, so the append's own observation also names the hours of the rows left out: one job either way, and the
    check for differing copies after it reads those hours only, not every hour the batch touches (on a table whose
    hours hold a file per batch, that read grew with every batch: docs/performance.md "Iceberg")."""
    ms = event_time_ms(table)
    earliest, latest = event_bounds_ms
    new, measures, observed = rows, [row_count()], Observation()
    if earliest is not None and latest is not None:
        low = earliest // MS_PER_HOUR * MS_PER_HOUR
        high = (latest // MS_PER_HOUR + 1) * MS_PER_HOUR
        keys = list(table.key)
        held = F.col(_HELD).isNotNull()
        existing = existing_keys(rows.sparkSession, table, target, low, high).withColumn(_HELD, F.lit(True))
        new = rows.withColumn(_HOUR, F.floor(ms / F.lit(MS_PER_HOUR))).join(existing, [*keys, _HOUR], "left")
        # A string, not an array: it crosses py4j as one value on every pyspark line (glue_jobs/observed.py)
        measures = [F.count(F.when(~held, F.lit(1))).alias("rows"),
                    F.concat_ws(",", F.collect_set(F.when(held, F.col(_HOUR).cast("string")))).alias("held")]
        new = new.observe(observed, *measures).where(~held).select(*(F.col(f"`{name}`") for name in rows.columns))
    else:
        new = new.observe(observed, *measures)
    # By name at every depth: a field merged into the table goes last, where the batch's rows may hold it elsewhere
    # (Iceberg's `spark.sql.iceberg.check-ordering`, true by default, refuses such an append as "out of order").
    # Adaptive execution off for the append (a streaming micro-batch has it off anyway): with it on, an append whose
    # rows were all left out never delivered its observation, and `observed.get` waited for ever (seen on Spark 3.5.4
    # with Iceberg 1.7.1 in a batch session; why is unverified: tests/spark/test_iceberg_lines.py keeps the case).
    with session_conf(rows.sparkSession, APPEND_SETTINGS):
        new.writeTo(target.name).option(f"snapshot-property.{BATCH_PROPERTY}", tag).option("merge-schema", "true").append()
    values = observed_values(observed, *(["rows", "held"] if len(measures) > 1 else ["rows"]))
    return Appended(int(values["rows"]), tuple(sorted(int(h) for h in str(values.get("held") or "").split(",") if h)))


def differing_from_table(table: LakeTable, target: IcebergTarget, rows: DataFrame,
                         event_bounds_ms: tuple[int | None, int | None], hours: tuple[int, ...] | None = None) -> int:
    """Of a batch's lake `rows` (after its own collapse), those whose key the table holds for the same hour with another
    content (survivors.content_hash over every column but the ingestion metadata and the partitions). A row append_batch
    wrote meets itself and is equal, so call it after the append: what it counts are the rows the append left out that
    differ from the row kept. Both sides are compared in one type per column (`merged`: struct fields by name at any
    depth, a field merged into the table goes last), a field or column only one side has being null on the other.
    `hours`: the epoch hours to read (Appended.held_hours: no row left out elsewhere can differ); None reads every
    hour of `event_bounds_ms` (a replayed batch, whose append is not in this attempt)."""
    earliest, latest = event_bounds_ms
    if earliest is None or latest is None or hours == ():
        return 0
    skipped = {name for name, _, _ in INGESTION_COLUMNS + PARTITION_COLUMNS}
    mine = {f.name: f.dataType for f in rows.schema.fields if f.name not in skipped}
    spark_table = rows.sparkSession.table(target.name)
    theirs = {f.name: f.dataType for f in spark_table.schema.fields if f.name not in skipped}
    names = [*mine, *(name for name in theirs if name not in mine)]
    types = {name: merged(theirs[name], mine[name]) if name in theirs and name in mine else theirs.get(name, mine.get(name))
             for name in names}
    low, high = earliest // MS_PER_HOUR * MS_PER_HOUR, (latest // MS_PER_HOUR + 1) * MS_PER_HOUR
    event_time = F.col(f"`{table.event_time}`")
    keys = [f"`{k}`" for k in table.key]

    def hashed(frame: DataFrame, present: dict, alias: str) -> DataFrame:
        values = [(conformed(F.col(f"`{n}`"), present[n], types[n]) if n in present else F.lit(None).cast(types[n]), types[n])
                  for n in names]
        return frame.select(*(F.col(k) for k in keys), F.floor(event_time_ms(table) / F.lit(MS_PER_HOUR)).alias(_HOUR),
                            content_hash(values).alias(alias))

    ranges = [(low, high)] if hours is None else _runs(hours)
    existing = spark_table.where(functools.reduce(lambda a, b: a | b, [
        (event_time >= F.lit(_utc(start))) & (event_time < F.lit(_utc(end))) for start, end in ranges]))
    joined = hashed(rows, mine, "_mine").join(hashed(existing, theirs, "_theirs"), [*table.key, _HOUR])
    return joined.where(F.col("_mine") != F.col("_theirs")).count()


def _runs(hours: tuple[int, ...]) -> list[tuple[int, int]]:
    """Epoch hours as [start, end) millisecond ranges, consecutive hours in one range: timestamp bounds on the event
    time column, which Iceberg prunes its hours() partitions by (existing_keys says why not unix_millis). Several
    ranges are OR'd: Iceberg's Spark filter conversion turns an Or of two convertible filters into its own or()
    (apache/iceberg spark/v3.5 SparkFilters.convert, case OR), so they are pushed down as one range is. Measured,
    not asserted by a test: docs/performance.md "Iceberg"; a filter not pushed down would still be applied by Spark."""
    runs: list[list[int]] = []
    for hour in sorted(set(hours)):
        if runs and runs[-1][1] == hour:
            runs[-1][1] = hour + 1
        else:
            runs.append([hour, hour + 1])
    return [(start * MS_PER_HOUR, end * MS_PER_HOUR) for start, end in runs]


def merged(first: DataType, second: DataType) -> DataType:
    """One type for values of both: struct fields by name at any depth (`first`'s in its order, then those only
    `second` has), arrays and maps element by element, anything else `first`."""
    from pyspark.sql import types as T

    if isinstance(first, T.StructType) and isinstance(second, T.StructType):
        theirs = {f.name: f.dataType for f in second.fields}
        ours = {f.name for f in first.fields}
        return T.StructType([T.StructField(f.name, merged(f.dataType, theirs[f.name]) if f.name in theirs else f.dataType)
                             for f in first.fields] + [f for f in second.fields if f.name not in ours])
    if isinstance(first, T.ArrayType) and isinstance(second, T.ArrayType):
        return T.ArrayType(merged(first.elementType, second.elementType))
    if isinstance(first, T.MapType) and isinstance(second, T.MapType):
        return T.MapType(first.keyType, merged(first.valueType, second.valueType))
    return first


def conformed(column: Column, have: DataType, want: DataType) -> Column:
    """`column` (of type `have`) in type `want`: struct fields by name at any depth (a field `have` lacks is null, one
    `want` lacks is left out), arrays and map values element by element, anything else cast."""
    from pyspark.sql import types as T

    if have == want:
        return column
    if isinstance(have, T.StructType) and isinstance(want, T.StructType):
        fields = {f.name: f.dataType for f in have.fields}
        return F.when(column.isNotNull(), F.struct(*(
            (conformed(column[f.name], fields[f.name], f.dataType) if f.name in fields else F.lit(None).cast(f.dataType)).alias(f.name)
            for f in want.fields)))
    if isinstance(have, T.ArrayType) and isinstance(want, T.ArrayType):
        return F.transform(column, lambda x: conformed(x, have.elementType, want.elementType))
    if isinstance(have, T.MapType) and isinstance(want, T.MapType):
        return F.transform_values(column, lambda _, v: conformed(v, have.valueType, want.valueType))
    return column.cast(want)
