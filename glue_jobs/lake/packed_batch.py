"""The validated micro-batch, persisted once in a packed form that every later step reads.

`PackedBatch` is the only code that knows the cache's private columns. Callers get:
- `counts()`: one aggregation (the action that fills the cache): records in, valid rows, a count per
  reason code, the valid rows per write slot and the hashes of the event_ids seen more than once;
- `lake_rows(counts)`: valid rows, one per event_id, with the write-time columns (glue_jobs/lake/lake_layout.py);
- `dead_letters(...)`: the rejected rows as dead letters.

Packing (why, with figures: docs/streaming-job.md, "Benchmark history"):
- persisted once, uncompressed, as objects (`CACHE_LEVEL`): four reads (counts, duplicate ranking, lake and
  dead-letter writes) each need other columns, and the cache lives for one batch;
- the lake values in one struct column and what a dead letter needs in another (null for a valid row):
  the columnar cache costs per cached value, and a valid row's payload is never read again;
- the reason as a number and a 64-bit hash of event_id: the counts group by fixed-width keys only, and
  only rows whose hash occurs twice are ranked (glue_jobs/lake/survivors.py says which copy survives);
- read through the cache alone (glue_jobs/lake/cache_leaf.py): its queries are planned on the cache, not the validation;
- not sorted before it is cached: the partitioned lake write sorts its rows by hour anyway, and sorting
  the whole batch by slot and time first cost more than it saved the write (docs/streaming-job.md).

Write slots: a valid row's slot is its epoch hour modulo `WRITE_SLOTS`, a constant, so which hours share
a slot depends on the data only, never on how many executors Glue auto scaling gives the job. Only a
batch whose valid rows spread evenly over the slots (`write_by_slot`: a backfill, a catch-up after
downtime) is written by slot, whole slots per task (`_lake_rows_by_slot`); every other batch is written by coalescing the cache, each task
writing its share of every hour, which keeps all cores busy when a batch holds one or two hours.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark import SparkContext, StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from glue_jobs.column_seq import ColumnSeq, aggregate, select
from glue_jobs.contract import COUNTED, REASON_CODES
from glue_jobs.decoding.registry_frames import UNKNOWN_SCHEMA_VERSION, version_id_of
from glue_jobs.lake.cache_leaf import cached_leaf, one_stage
from glue_jobs.lake.dropped_copies import observed_losers, ranked_keys, with_keys
from glue_jobs.lake.lake_layout import dead_letter_write_columns, epoch_millis, hour_modulo, lake_write_columns
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.survivors import survivor_first
from glue_jobs.schema import DEAD_LETTER_COLUMNS
from glue_jobs.session import session_conf

WRITE_SLOTS = 8  # slots a batch's hours are spread over (module doc): a backfill of a few more hours fills every one
# A batch is written one slot per task when its fullest slot holds at most this much more than an even share.
SLOT_BALANCE = 1.25
# The largest batch whose duplicates are ranked in one task (ranking_tasks; figures: docs/performance.md).
RANK_IN_ONE_TASK_UP_TO = 100_000
# A write gets a task per this many rows, at most one per core (writing_tasks; figures: docs/performance.md).
ROWS_PER_WRITE_TASK = 50_000
# Cached as objects (what Dataset.cache() does): pyspark's MEMORY_AND_DISK is the serialized level, which
# copies every cached batch through the serializer when it is stored and again for each read.
CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER
_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"
# What defining the cache sets for its duration (PackedBatch.__enter__ says why).
CACHE_SETTINGS = {_CACHE_COMPRESSED: "false"}

_LAKE = "_lake"  # struct: the lake values validate() returned
_DEAD = "_dead"  # struct: payload, reason, detail and the ingestion columns; null for a valid row
_CODE = "_code"  # the reason code's number, 0 for a valid row
_ROW = "_row"  # row id: tells the copies of a duplicated event_id apart (exact ties too)
_KEY = "_key"  # 64-bit hash of a valid row's event_id, null for a rejected row
_SLOT = "_slot"  # a valid row's write slot, null for a rejected row
_REASON_NUMBERS = {code: number for number, code in enumerate(REASON_CODES, start=1)}
_UNKNOWN_REASON = -1  # never produced by glue_jobs.contract; such a row still counts as rejected


@dataclass(frozen=True)
class BatchCounts:
    records_in: int
    valid: int
    by_reason: dict[str, int]  # reason code -> rejected rows, codes with none left out
    slot_rows: tuple[int, ...]  # valid rows per write slot (a duplicated id counts in its lowest slot)
    duplicate_keys: str  # JSON array of the event_id hashes seen more than once among valid rows
    newest_event_ms: int | None = None  # the latest event time among valid rows (epoch ms)
    oldest_event_ms: int | None = None  # the earliest event time among valid rows (an Iceberg append's hour bounds)
    oldest_arrival_ms: int | None = None  # the earliest arrival time (the source's record timestamp) of any row
    unknown_fields: int = 0  # valid rows with fields the schema does not know, kept or dropped (dataset.json unknown_fields)
    replacement_characters: int = 0  # rows whose payload holds U+FFFD, where the source decoded it (contract.REPLACEMENTS)

    @property
    def rejected(self) -> int:
        return self.records_in - self.valid


def ranking_tasks(records_in: int, tasks: int) -> int:
    """Tasks that read the cache for the duplicate ranking: one for a batch of at most RANK_IN_ONE_TASK_UP_TO records
    (a single partition satisfies the window's clustered distribution: no shuffle, a stage fewer), else `tasks` (on
    Glue a large batch's cached blocks live on several executors, which one task would fetch)."""
    return 1 if records_in <= RANK_IN_ONE_TASK_UP_TO else tasks


def writing_tasks(rows: int, tasks: int) -> int:
    """Tasks that write `rows` rows coalesced (not by slot): one per ROWS_PER_WRITE_TASK, at least one, at most `tasks`.
    Coalesced, a task writes a file per partition its rows touch, so a small batch spread over every core wrote as
    many files per hour as cores, each a file to create, publish and later compact, with no time gained. Written by
    slot, each hour is one file whatever the tasks, and all of them write."""
    return max(1, min(tasks, -(-rows // ROWS_PER_WRITE_TASK)))


def write_by_slot(slot_rows: tuple[int, ...] | list[int]) -> bool:
    """Whether valid rows spread evenly enough over the write slots to write one slot per task (SLOT_BALANCE)."""
    if len(slot_rows) != WRITE_SLOTS:
        raise ValueError(f"expected {WRITE_SLOTS} slot counts, got {len(slot_rows)}")
    total = sum(slot_rows)
    return total > 0 and max(slot_rows) <= SLOT_BALANCE * total / WRITE_SLOTS


class PackedBatch:
    """`with PackedBatch(validated, tasks=n) as batch:` persists the batch; leaving the block unpersists it.
    `tasks` is how many tasks read it (one per core): the coalesced lake write and the dead letters."""

    def __init__(self, validated: DataFrame, *, tasks: int, table: LakeTable | None = None) -> None:
        self.tasks = tasks
        self.table = table = table or LakeTable.of()
        self._counted = tuple(name for name in COUNTED if name in validated.columns)  # contract.COUNTED
        self._frame = _packed(validated, table)

    def __enter__(self) -> PackedBatch:
        # Without columnar compression (compressing the payload strings cost more than the validation); the
        # flag is read when the cache is defined, so it is restored right after.
        with session_conf(self._frame.sparkSession, CACHE_SETTINGS):
            self._persisted = self._frame.persist(CACHE_LEVEL)
        self._frame = cached_leaf(self._persisted)
        return self

    def __exit__(self, *exc) -> None:
        self._persisted.unpersist()

    def counts(self) -> BatchCounts:
        """The batch's counts, in one aggregation over (reason number, event_id hash): only longs and counts are shuffled
        (nothing for a cache of one partition: one_stage), never ids or payloads. The one action that fills the cache."""
        by, per_key, totals = _count_columns(self.table.event_time, self._counted, SparkContext._jvm)
        row = aggregate(aggregate(one_stage(self._frame), by, per_key), None, totals).collect()[0]
        return BatchCounts(
            records_in=int(row["records_in"]),
            valid=int(row["valid"]),
            by_reason={code: int(row[code]) for code in REASON_CODES if row[code]},
            slot_rows=tuple(int(row[f"slot_{slot}"]) for slot in range(WRITE_SLOTS)),
            duplicate_keys=row["duplicate_keys"],
            newest_event_ms=row["newest_event_ms"],
            oldest_event_ms=row["oldest_event_ms"],
            oldest_arrival_ms=row["oldest_arrival_ms"],
            **{COUNTED[name]: int(row[COUNTED[name]]) for name in self._counted},
        )

    def valid_row_ids(self) -> list[int]:
        """The valid rows' ids, in order (glue_jobs/lake/unwritable.py bisects over them)."""
        return sorted(row[0] for row in self._frame.filter(F.col(_CODE) == 0).select(_ROW).collect())

    def key_hashes(self, row_ids: list[int]) -> tuple[tuple[int, ...], int]:
        """The key hashes of these rows (what `lake_rows(without_keys=...)` takes) and how many valid rows have them."""
        hashes = tuple(sorted({row[0] for row in self._frame.filter(F.col(_ROW).isin(row_ids)).select(_KEY).collect()}))
        return hashes, self._frame.filter((F.col(_CODE) == 0) & F.col(_KEY).isin(list(hashes))).count()

    def unknown_versions(self) -> list[str]:
        """The schema version UUIDs of the batch's unknown_schema_version rows (glue_jobs/decoding/registry_frames.py)."""
        number = _REASON_NUMBERS[UNKNOWN_SCHEMA_VERSION]
        details = self._frame.filter(F.col(_CODE) == number).select(F.col(f"{_DEAD}.detail")).distinct().limit(1000).collect()
        return sorted({v for v in (version_id_of(row[0] or "") for row in details) if v})

    def lake_rows(self, counts: BatchCounts, *, batch_id: int, rows_between: tuple[int, int] | None = None,
                  without_keys: tuple[int, ...] = (), dropped: Observation | None = None) -> DataFrame:
        """Valid rows, one per event_id, as the lake's columns. The copies of a duplicated id are ranked
        (only the rows whose hash occurs twice: a collision merely ranks two ids that each keep their own
        winner) and the losers' row ids broadcast and removed, so the other rows are neither shuffled nor
        sorted and each write task keeps its partitions. `rows_between` (row ids, inclusive) and `without_keys`
        (key hashes: every copy of those keys) narrow the rows (glue_jobs/lake/unwritable.py).

        `dropped`, when the batch has duplicates, observes the losers as the write computes them, and those whose content
        differs from their survivor's (glue_jobs/lake/dropped_copies.py; read it with `counted` once the rows are written)."""
        columns = _lake_row_columns(tuple(self.table.key), SparkContext._jvm)
        valid = self._frame.filter(columns.is_valid)
        if rows_between is not None:
            valid = valid.filter(F.col(_ROW).between(*rows_between))
        if without_keys:
            valid = valid.filter(~F.col(_KEY).isin(list(without_keys)))
        if write_by_slot(counts.slot_rows):  # each hour one file already, whatever the tasks: all cores write
            rows = _lake_rows_by_slot(valid, self.tasks, columns.unpacked)
        else:
            rows = select(valid, columns.unpacked).coalesce(writing_tasks(counts.valid, self.tasks))
        keys = ranked_keys(counts, without_keys)
        if keys != "[]":
            # Candidates straight from the cache, not from the slots' union: Spark pushes the anti join into
            # each branch of a union, and a losers plan built on the union ran once per branch.
            candidates = with_keys(select(valid, columns.unpacked).coalesce(ranking_tasks(counts.records_in, self.tasks)), keys, _KEY)
            if dropped is None:
                losers = select(select(candidates, columns.ranked).filter(columns.is_loser), columns.row_id)
            else:
                losers = observed_losers(candidates, tuple(self.table.key), dropped, row=_ROW, ignored=(_ROW, _KEY))
            rows = rows.join(F.broadcast(losers), _ROW, "left_anti")
        return lake_write_columns(rows, batch_id=batch_id, table=self.table)

    def dead_letters(self, counts: BatchCounts, *, batch_id: int, processing_date: str, extra: DataFrame | None = None) -> DataFrame:
        """The rejected rows as dead letters, in `writing_tasks` partitions (see lake_layout.dead_letter_write_columns),
        with `extra` rows of the same columns (glue_jobs/lake/unwritable.py)."""
        columns = _lake_row_columns(tuple(self.table.key), SparkContext._jvm)
        rejected = select(self._frame.filter(~columns.is_valid), columns.dead_letter)
        rejected = rejected if extra is None else rejected.unionByName(extra)
        tasks = writing_tasks(counts.rejected + (extra is not None), self.tasks)
        return dead_letter_write_columns(rejected, batch_id=batch_id, processing_date=processing_date).coalesce(tasks)


@functools.cache
def _count_columns(event_time: str, counted: tuple[str, ...], jvm) -> tuple[ColumnSeq, ColumnSeq, ColumnSeq]:
    """`counts()`'s grouping, its aggregates per (reason number, key) and its totals, for a table whose event time
    is `event_time` (`counted`: contract.COUNTED columns the rows carry): built once per JVM, not ~500 py4j calls a batch."""
    is_valid = F.col(_CODE) == 0
    event_ms = F.expr(f"unix_millis(`{_LAKE}`.`{event_time}`)")  # null on rejected rows
    per_key = [F.count(F.lit(1)).alias("_n"), F.min(_SLOT).alias(_SLOT), F.max(event_ms).alias("_newest"),
               F.min(event_ms).alias("_earliest"), F.min(F.expr(f"unix_millis(`{_LAKE}`.`arrival_time`)")).alias("_oldest"),
               *(F.count(name).alias(name) for name in counted)]

    def total(condition: Column | None = None) -> Column:
        return F.coalesce(F.sum(F.col("_n") if condition is None else F.when(condition, F.col("_n"))), F.lit(0))

    totals = [
        total().alias("records_in"),
        total(is_valid).alias("valid"),
        *(total(F.col(_CODE) == number).alias(code) for code, number in _REASON_NUMBERS.items()),
        *(total(is_valid & (F.col(_SLOT) == slot)).alias(f"slot_{slot}") for slot in range(WRITE_SLOTS)),
        F.to_json(F.collect_list(F.when(is_valid & (F.col("_n") > 1), F.col(_KEY)))).alias("duplicate_keys"),
        F.max(F.when(is_valid, F.col("_newest"))).alias("newest_event_ms"),
        F.min(F.when(is_valid, F.col("_earliest"))).alias("oldest_event_ms"),
        F.min("_oldest").alias("oldest_arrival_ms"),
        *(F.coalesce(F.sum(name), F.lit(0)).alias(COUNTED[name]) for name in counted),
    ]
    return ColumnSeq([F.col(_CODE), F.col(_KEY)]), ColumnSeq(per_key), ColumnSeq(totals)


def _lake_rows_by_slot(valid: DataFrame, tasks: int, unpacked: ColumnSeq) -> DataFrame:
    """The one place a batch is written by slot: each of min(tasks, WRITE_SLOTS) partitions holds the valid
    rows of whole slots (slot s in partition s mod that number), read from every cached partition (an IN
    filter on the slot column), so each hour is written by one task into one file. How many tasks
    share the slots follows the cores; which hours share a slot, and so the files, does not."""
    branches = max(1, min(tasks, WRITE_SLOTS))
    slots = [select(valid.filter(condition), unpacked).coalesce(1) for condition in _slot_filters(branches, SparkContext._jvm)]
    return functools.reduce(DataFrame.union, slots)


@dataclass(frozen=True)
class _LakeRowColumns:
    """`lake_rows`' columns for one key (glue_jobs/column_seq.py): built once per JVM."""

    is_valid: Column
    unpacked: ColumnSeq  # the cached lake values as columns again, with the row id and key
    ranked: ColumnSeq  # the row id and its rank among its key's copies (survivors.py: the survivor first)
    is_loser: Column
    row_id: ColumnSeq
    dead_letter: ColumnSeq  # a rejected row's dead-letter columns


@functools.cache
def _slot_filters(branches: int, jvm) -> list[Column]:
    """`_lake_rows_by_slot`'s filter of each of `branches` branches, built once per JVM."""
    return [F.col(_SLOT).isin(list(range(branch, WRITE_SLOTS, branches))) for branch in range(branches)]


@functools.cache
def _lake_row_columns(key: tuple[str, ...], jvm) -> _LakeRowColumns:
    rank = F.row_number().over(survivor_first(_ROW, key=key))
    return _LakeRowColumns(is_valid=F.col(_CODE) == 0, unpacked=ColumnSeq([F.col(f"{_LAKE}.*"), F.col(_ROW), F.col(_KEY)]),
                           ranked=ColumnSeq([F.col(_ROW), rank.alias("_rank")]), is_loser=F.col("_rank") > 1,
                           row_id=ColumnSeq([F.col(_ROW)]), dead_letter=ColumnSeq([F.col(f"{_DEAD}.*")]))


def _packed(validated: DataFrame, table: LakeTable) -> DataFrame:
    """validate()'s columns packed for the cache (see the module doc); the row id is assigned here: input
    order, the duplicate ranking's last tie-break."""
    lake, counted = tuple(name for name in validated.columns if name in set(table.column_names())), tuple(c for c in COUNTED if c in validated.columns)
    return select(validated, _packed_columns(lake, tuple(table.key), table.event_time, counted, SparkContext._jvm))


@functools.cache
def _packed_columns(lake: tuple[str, ...], key: tuple[str, ...], event_time: str, counted: tuple[str, ...], jvm) -> ColumnSeq:
    """`_packed`'s columns for these lake columns, key and event time, built once per JVM (glue_jobs/column_seq.py)."""
    is_valid = F.col("reason").isNull()
    dead = [name for name, _, _ in DEAD_LETTER_COLUMNS if name != "batch_id"]
    event_ms = epoch_millis(event_time)
    return ColumnSeq([
        F.struct(*(F.col(f"`{name}`") for name in lake)).alias(_LAKE),
        F.when(~is_valid, F.struct(*dead)).alias(_DEAD),
        _reason_number(F.col("reason")).alias(_CODE),
        F.monotonically_increasing_id().alias(_ROW),
        F.when(is_valid, F.xxhash64(*(F.col(f"`{name}`") for name in key))).alias(_KEY),
        F.when(is_valid, hour_modulo(event_ms, WRITE_SLOTS).cast("byte")).alias(_SLOT),
        *(F.col(name) for name in counted),
    ])


def _reason_number(reason: Column) -> Column:
    """0 for a valid row (null reason), the reason code's number otherwise (see _REASON_NUMBERS)."""
    number = F.when(reason.isNull(), F.lit(0))
    for code, value in _REASON_NUMBERS.items():
        number = number.when(reason == code, F.lit(value))
    return number.otherwise(F.lit(_UNKNOWN_REASON)).cast("byte")
