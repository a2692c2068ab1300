"""The micro-batch function: validate, collapse duplicates, write lake + dead letters exactly once.

Exactly-once per micro-batch (DESIGN invariant 1). Spark (and Glue's forEachBatch) replays a batch with
the same id and the same offsets when it crashed before its checkpoint commit. For batch b:

1. If the commit marker `<checkpoint>/_streamlake/batch-<b>.committed.json` exists, the batch was fully
   published before the crash: nothing is written again, the recorded counts are returned.
2. Otherwise any earlier partial output is removed: the files named in the publish manifest
   `batch-<b>.manifest.json` (written before the first file moved) and both staging directories.
3. Lake rows and dead letters are written by Spark into hidden staging directories
   (`<lake>/_staging/<source>/batch=<b>/`, `<dead letters>/_staging/batch=<b>/`), the manifest of final
   names is written, each file is moved to its deterministic final name, then the commit marker.

Final names: `<lake>/event_date=YYYY-MM-DD/event_hour=H/part-<source>-<stream>-b<batch:010d>-<n:04d>.snappy.parquet`
and `<dead letters>/ingest_date=YYYY-MM-DD/part-<source>-<stream>-b<batch:010d>-<n:04d>.snappy.parquet`,
where <stream> is the first 8 characters of the streaming query id in `<checkpoint>/metadata`: a new
checkpoint restarts batch ids at 0 without colliding with an earlier run's files.

The validated frame is persisted once, uncompressed, as objects, packed for the columnar cache
(`cached_columns`: the lake values in one struct, what a dead letter needs in another, null for valid rows;
the batch id and the partition values are derived again at write time), each partition ordered by write
slot, then event_time (`_grouped_by_hour`). One aggregation over (reason number, 64-bit hash of event_id)
gives every count, the rows per write slot and the hashes seen more than once; only rows with those hashes
are ranked (lowest source partition, then offset as a number, then input order) and the losers removed
from the lake write. A batch whose hours spread evenly over the write tasks is written one slot (a set of
hours) per task, one file per hour; otherwise every task writes its share of every hour (`_lake_rows`).
The writes count the rows they write (Observation): records_in = records_written + dead_letters +
duplicates_collapsed, and a batch whose dead letters do not match its invalid records fails before
anything is published.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, Window
from pyspark.sql import functions as F

from glue_jobs import partitions_log
from glue_jobs.contract import REASON_CODES, hour_modulo, partition_values, validate, with_batch_constants
from glue_jobs.metrics import MetricsSink, NoOpMetricsSink
from glue_jobs.schema import DEAD_LETTER_COLUMNS, DEAD_LETTER_PARTITION_COLUMNS, spark_lake_schema
from glue_jobs.session import session_conf
from glue_jobs.storage import HadoopStorage

log = logging.getLogger("glue_jobs.batch")

STATE_DIR = "_streamlake"
STAGING_DIR = "_staging"
PARQUET_SUFFIX = ".snappy.parquet"
# Markers older than this many batches are deleted: only the last uncommitted batch is ever replayed.
MARKERS_KEPT = 100
# Files moved from staging at once: every move is a request on S3, a batch writes up to one file per core
# and partition.
PUBLISH_THREADS = 8
# Row id of the persisted validated frame: tells the copies of a duplicated event_id apart (exact ties too).
_ROW = "_row"
# 64-bit hash of a valid row's event_id (null for a dead letter): what the duplicate count groups by.
_KEY = "_key"
# Lake columns the cache does not hold: derived again where they are written (cheaper than caching them:
# filling the columnar cache costs per value, ~0.2 s of 1 s for these 1M rows, local[2]).
_DERIVED = ("batch_id", "event_date", "event_hour")
# The reason code as a number (0: valid): the counts group by it and a 64-bit key, both fixed-width (1M rows,
# local[2]: counts 0.72 s -> 0.61 s against the reason text); the text is cached with the dead letter.
_CODE = "_code"
_REASON_NUMBERS = {code: number for number, code in enumerate(REASON_CODES, start=1)}
_UNKNOWN_REASON = -1  # never produced by glue_jobs.contract; such a row still counts as invalid and is dead-lettered
# Write slot of a valid row (null for a dead letter): its epoch hour modulo the number of write tasks, so
# that a slot is a set of whole hours (see _lake_rows).
_SLOT = "_slot"
# Slots are written one per task when the fullest slot holds at most this much more than an even share of
# the valid rows (a batch over many hours: a backfill, a catch-up after downtime, the benchmark); otherwise
# (one or two hours, the usual streaming batch) every task writes its share of every hour.
SLOT_BALANCE = 1.25
# Bits below the slot in the cache's sort key (epoch milliseconds stay below 2^43 until the year 2248).
_SLOT_SHIFT = 43
# The cached struct columns: lake values, and what a dead letter needs (see cached_columns).
_CACHED = "_cached"
_DEAD = "_dead"
_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# The cached batches are kept as objects (what Dataset.cache() does): pyspark's MEMORY_AND_DISK is the
# *serialized* level, which copies every cached batch through the serializer when it is stored and again
# for each of the four reads (counts, duplicate ranking, lake and dead-letter writes), whichever columns a
# read needs. 1M records, local[2], whole runner: 7.87 s serialized, 7.17 s deserialized (medians of 6).
CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER
# Parquet dictionary encoding only for the lake columns with few distinct values per file. The batch files
# live about an hour (compaction rewrites them with Parquet's defaults), so they are written for speed: a
# dictionary for near-unique values (event_id, offsets, times, amounts) fills up and falls back to plain
# encoding after hashing every value, which cost more than half the lake write (1M rows, local[2]: 4.6 s
# with dictionaries everywhere, 3.0 s with these). Per-column `#name` keys: parquet-mr 1.12+ (Spark 3.3, 3.5).
DICTIONARY_COLUMNS = ("event_type", "currency", "source", "source_partition", "arrival_time", "batch_id")
# Staging writes leave no _SUCCESS marker: the commit marker is the batch's own (batch-<b>.committed.json),
# staging is deleted after publishing, and each marker is one more file to create (a PUT on S3; locally,
# Hadoop's file system without its native library starts a `chmod` process per file and directory).
_STAGING_WRITE_OPTIONS = {"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}
_LAKE_PARQUET_OPTIONS = {
    **_STAGING_WRITE_OPTIONS,
    "compression": "snappy",
    "parquet.enable.dictionary": "false",
    **{f"parquet.enable.dictionary#{name}": "true" for name in DICTIONARY_COLUMNS},
}
if set(DICTIONARY_COLUMNS) - set(spark_lake_schema().fieldNames()):
    raise ValueError(f"DICTIONARY_COLUMNS {DICTIONARY_COLUMNS} names a column the lake schema does not have")


@dataclass(frozen=True)
class BatchStats:
    source: str
    batch_id: int
    records_in: int
    records_written: int
    dead_letters: int
    duplicates_collapsed: int
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    files_written: int = 0
    replayed: bool = False

    @property
    def reconciles(self) -> bool:
        return self.records_in == self.records_written + self.dead_letters + self.duplicates_collapsed

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchStats:
        return cls(**json.loads(text))


def _rank_by_lowest_position(rows: DataFrame) -> DataFrame:
    """`_rank` 1 for the copy of each event_id at the lowest source position: partition, then offset compared
    as a number (length, then text), unknown positions last, then the row id (input order) for exact ties."""
    lowest_position_first = Window.partitionBy("event_id").orderBy(
        F.col("source_partition").asc_nulls_last(),
        F.length("source_offset").asc_nulls_last(),
        F.col("source_offset").asc_nulls_last(),
        F.col(_ROW),
    )
    return rows.withColumn("_rank", F.row_number().over(lowest_position_first))


def _lake_rows(cached: DataFrame, duplicate_keys: DataFrame | None, *, tasks: int, batch_id: int,
               by_slot: bool = False) -> DataFrame:
    """Valid rows, one per event_id, in `tasks` partitions (no shuffle). `duplicate_keys` (_KEY) holds the
    hashes of the event_ids that occur more than once, a few per batch (None: there are none). Only the rows
    with those hashes are ranked (a hash collision merely ranks two ids that then each keep their own
    winner); the losers' row ids are broadcast and removed, so the other rows are neither shuffled nor
    sorted and each write task keeps its partitions. batch_id and the partition columns are derived here
    (not cached); event_date is a DATE for the write (see contract.partition_values).

    Partitions: with `by_slot`, partition i holds the rows of write slot i (whole hours), read from every
    cached partition (sorted by slot, the cache's batch statistics let each task skip the other slots'
    batches), so each hour is written by one task into one file. 1M records over 49 hours, local[2]: the
    lake write alone 2.11 s -> 1.57 s (in the runner, its job 2.24 s -> 1.66 s), 49 files instead of 98 (each file costs the Parquet writer's setup and,
    on a local disk, Hadoop's chmod processes). Otherwise the cached partitions are coalesced: every task
    writes its share of every hour, which keeps all cores busy when a batch holds one or two hours."""
    valid_rows = cached.filter(F.col(_CODE) == 0)
    if by_slot and tasks > 1:
        slots = [_unpacked(valid_rows.filter(F.col(_SLOT) == slot)).coalesce(1) for slot in range(tasks)]
        valid = functools.reduce(DataFrame.union, slots)
    else:
        valid = _unpacked(valid_rows).coalesce(tasks)
    if duplicate_keys is not None:
        # Candidates straight from the cache, not from the slots' union: Spark pushes the anti join into
        # each branch of a union, and a losers plan built on the union ran once per branch.
        candidates = _unpacked(valid_rows).coalesce(tasks).join(F.broadcast(duplicate_keys), _KEY, "left_semi")
        losers = candidates.transform(_rank_by_lowest_position).filter(F.col("_rank") > 1).select(_ROW)
        valid = valid.join(F.broadcast(losers), _ROW, "left_anti")
    valid = with_batch_constants(valid, {"_batch_id": batch_id})
    event_time_ms = F.expr("unix_millis(event_time)")
    derived = {"batch_id": F.col("_batch_id"), **partition_values(event_time_ms, date_type=True)}
    return valid.select(*(derived[name].alias(name) if name in derived else F.col(name) for name in spark_lake_schema().fieldNames()))


def write_by_slot(slot_rows: list[int], tasks: int) -> bool:
    """Whether a batch's valid rows per write slot (`slot_rows`, one count per task) are even enough to write
    one slot per task (SLOT_BALANCE); never for a single task or a batch without valid rows."""
    if tasks < 2 or len(slot_rows) != tasks:
        return False
    total = sum(slot_rows)
    return total > 0 and max(slot_rows) <= SLOT_BALANCE * total / tasks


def to_dead_letters(cached: DataFrame, *, processing_date: str, batch_id: int) -> DataFrame:
    is_dead_letter = F.col(_CODE) != 0
    # Arrival date in UTC, as the lake's event_date (session time zone independent); the processing date when
    # a record has no arrival time.
    arrival_date = partition_values(F.expr("unix_millis(arrival_time)"))["event_date"]
    columns = [F.col("_batch_id").alias(name) if name == "batch_id" else F.col(name) for name, _, _ in DEAD_LETTER_COLUMNS]
    (partition,) = (name for name, _, _ in DEAD_LETTER_PARTITION_COLUMNS)
    dead_letters = with_batch_constants(cached.filter(is_dead_letter).select(f"{_DEAD}.*"), {"_batch_id": batch_id})
    return dead_letters.select(
        *columns, F.coalesce(arrival_date, F.lit(processing_date)).alias(partition)
    )


def cached_columns(validated: DataFrame, *, slots: int = 1) -> DataFrame:
    """The frame the batch caches: `_CODE` (the reason code's number, 0 for a valid row), `_ROW` (the row id),
    `_KEY` (the hash of a valid row's event_id) and `_SLOT` (a valid row's write slot: epoch hour modulo
    `slots`, the number of write tasks) as columns, the lake values in one struct column
    `_CACHED` (the validated columns but those derived again at write time, `_DERIVED`), and what a dead
    letter needs in another, `_DEAD` (with the reason text), null for a valid row (whose payload is never
    written).

    Structs instead of fifteen columns: the columnar cache appends every value of a plain column through
    its own builder and keeps min/max statistics for it (a comparison per string value); a struct is stored
    as the bytes of one row. 1M rows, local[2]: cache fill + counts + both writes 6.9 s -> 6.5 s. Each
    consumer decodes only what it reads: the counts read _CODE and _KEY (another 0.45 s less), the dead
    letters `_DEAD`, null but for the few invalid rows."""
    if set(_DERIVED) - set(validated.columns):
        raise ValueError(f"validated frame lacks {_DERIVED}: {validated.columns}")
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    is_valid = F.col("reason").isNull()
    slot = hour_modulo(F.expr("unix_millis(event_time)"), slots)
    dead = [name for name, _, _ in DEAD_LETTER_COLUMNS if name not in _DERIVED]
    lake = [name for name in spark_lake_schema().fieldNames() if name not in _DERIVED]
    return validated.select(
        F.struct(*lake).alias(_CACHED),
        F.when(~is_valid, F.struct(*dead)).alias(_DEAD),
        _reason_code(F.col("reason")).alias(_CODE),
        F.monotonically_increasing_id().alias(_ROW),
        F.when(is_valid, F.xxhash64("event_id")).alias(_KEY),
        F.when(is_valid, slot).alias(_SLOT),
    )


def _grouped_by_hour(packed: DataFrame) -> DataFrame:
    """Each partition of the cache ordered by write slot, then event_time (invalid rows, without either,
    first), as one long key: Spark radix-sorts its prefixes and never compares rows. The partitioned lake
    write sorts its rows by (event_date, event_hour) again: rows that arrive grouped by hour make that sort
    a merge of a few runs and let it read the rows back in memory order instead of jumping between pages
    (1M records over 49 hours, local[2], whole runner: 7.94 s -> 7.60 s, medians of 6, alternating); a slot's
    rows sit in few cached batches, which the other slots' write tasks skip (_lake_rows). The row id is
    assigned before the sort (input order, the ranking's last tie-break)."""
    event_time_ms = F.expr(f"unix_millis({_CACHED}.event_time)")
    return packed.sortWithinPartitions(F.col(_SLOT).cast("long") * F.lit(1 << _SLOT_SHIFT) + event_time_ms)


def _reason_code(reason):
    """0 for a valid row (null reason), the reason code's number otherwise (see _REASON_NUMBERS)."""
    number = F.when(reason.isNull(), F.lit(0))
    for code, value in _REASON_NUMBERS.items():
        number = number.when(reason == code, F.lit(value))
    return number.otherwise(F.lit(_UNKNOWN_REASON)).cast("byte")


def _unpacked(cached: DataFrame) -> DataFrame:
    """The cached lake values as columns again (reading them is a field access), with the reason number and keys."""
    return cached.select(f"{_CACHED}.*", _CODE, _ROW, _KEY)


def batch_counts(cached: DataFrame, *, slots: int = 1) -> DataFrame:
    """One row: records_in, valid, a count per reason code, `slot_<i>` for each of the `slots` write slots
    (valid rows; a duplicated id whose copies fall in two slots counts in the lower one: this only steers
    how the lake is written), and `duplicate_keys`, the JSON array of the `_KEY` hashes that occur more than
    once among valid rows (a few per batch: duplicates are rare).

    Grouping by (reason number, 64-bit hash) keeps the aggregation a hash aggregation over fixed-width keys: only
    longs and counts are shuffled, never ids or payloads. (Observing the counts instead saves ~0.1 s per 1M
    rows, but Observation.get never returns when Spark optimizes an empty batch's plan away.)"""
    is_valid = F.col(_CODE) == 0
    per_key = cached.groupBy(_CODE, _KEY).agg(F.count(F.lit(1)).alias("_n"), F.min(_SLOT).alias(_SLOT))

    def total(condition=None):
        return F.coalesce(F.sum(F.col("_n") if condition is None else F.when(condition, F.col("_n"))), F.lit(0))

    duplicated = is_valid & (F.col("_n") > 1)
    return per_key.agg(
        total().alias("records_in"),
        total(is_valid).alias("valid"),
        *(total(F.col(_CODE) == number).alias(code) for code, number in _REASON_NUMBERS.items()),
        *(total(is_valid & (F.col(_SLOT) == slot)).alias(f"slot_{slot}") for slot in range(slots)),
        F.to_json(F.collect_list(F.when(duplicated, F.col(_KEY)))).alias("duplicate_keys"),
    )


def _keys_frame(spark, keys_json: str) -> DataFrame:
    """The `_KEY` values of a JSON array as a one-column frame, built in the JVM (no Python rows to pickle)."""
    return spark.range(1).select(F.explode(F.from_json(F.lit(keys_json), "array<bigint>")).alias(_KEY))


def _persist_uncompressed(frame: DataFrame) -> DataFrame:
    """persist(CACHE_LEVEL) without columnar compression: compressing the payload strings cost more than
    the whole validation (300k records: 6.9 s compressed vs 4.1 s uncompressed, local[2]), and the cache
    lives for one batch only. The flag is read when the cache is defined, so it is restored right after."""
    with session_conf(frame.sparkSession, {_CACHE_COMPRESSED: "false"}):
        return frame.persist(CACHE_LEVEL)


def read_stream_id(storage: HadoopStorage, checkpoint_path: str) -> str:
    """First 8 characters of the streaming query id Spark keeps in `<checkpoint>/metadata`."""
    text = storage.read_text(f"{checkpoint_path.rstrip('/')}/metadata")
    return json.loads(text.splitlines()[0])["id"].replace("-", "")[:8]


class MicroBatchWriter:
    """Callable as `(envelope_frame, batch_id) -> BatchStats`; the same object runs in Glue and locally."""

    def __init__(
        self,
        spark,
        *,
        source_name: str,
        lake_path: str,
        dead_letter_path: str,
        checkpoint_path: str,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        stream_id: str | None = None,
    ) -> None:
        self.spark = spark
        self.storage = HadoopStorage(spark)
        self.source_name = source_name
        self.lake_path = lake_path.rstrip("/")
        self.dead_letter_path = dead_letter_path.rstrip("/")
        self.checkpoint_path = checkpoint_path.rstrip("/")
        self.state_path = f"{self.checkpoint_path}/{STATE_DIR}"
        self.metrics = metrics or NoOpMetricsSink()
        self.clock = clock
        self._stream_id = stream_id

    @property
    def stream_id(self) -> str:
        if self._stream_id is None:
            self._stream_id = read_stream_id(self.storage, self.checkpoint_path)
        return self._stream_id

    def _marker(self, batch_id: int, kind: str) -> str:
        return f"{self.state_path}/batch-{batch_id:010d}.{kind}.json"

    def _lake_staging(self, batch_id: int) -> str:
        return f"{self.lake_path}/{STAGING_DIR}/{self.source_name}/batch={batch_id}"

    def _dead_letter_staging(self, batch_id: int) -> str:
        return f"{self.dead_letter_path}/{STAGING_DIR}/batch={batch_id}"

    def __call__(self, envelope: DataFrame, batch_id: int) -> BatchStats:
        started = self.clock()
        batch_id = int(batch_id)
        committed = self._marker(batch_id, "committed")
        stats = self._committed_stats(committed)
        if stats is not None:
            log.info("batch %s of %s was already committed; replay writes nothing", batch_id, self.source_name)
            return BatchStats(**{**asdict(stats), "replayed": True})
        self._remove_partial_output(batch_id)

        now_ms = int(started * 1000)
        processing_date = time.strftime("%Y-%m-%d", time.gmtime(started))
        # The writes read the cache in one task per core (no shuffle): the cores stay evenly busy whatever
        # the input's partition count, and a batch writes at most one file per core and partition.
        write_tasks = max(1, self.spark.sparkContext.defaultParallelism)
        # The batch's shuffles (the counts aggregation, the duplicate ranking) in one partition per core as
        # well. Spark's default is 200, and inside a streaming query it stays 200: the query turns adaptive
        # execution off ("spark.sql.adaptive.enabled is not supported in streaming DataFrames/Datasets and
        # will be disabled", logged when the query starts), so nothing coalesces them. Set on the batch
        # frame's own session (the query's clone of the job's session), where the batch's plans are made.
        with session_conf(envelope.sparkSession, {SHUFFLE_PARTITIONS: str(write_tasks)}):
            # _ROW is fixed once the frame is cached (the counts action materializes it before the writes).
            validated = validate(envelope, now_ms=now_ms, batch_id=batch_id)
            cached = _persist_uncompressed(_grouped_by_hour(cached_columns(validated, slots=write_tasks)))
            written, dead_letters_written = 0, 0
            try:
                # The one action that materializes the batch (and fills the cache the writes read).
                counts = batch_counts(cached, slots=write_tasks).collect()[0]
                if counts["valid"]:
                    duplicates = counts["duplicate_keys"]
                    duplicate_keys = None if duplicates == "[]" else _keys_frame(self.spark, duplicates)
                    by_slot = write_by_slot([int(counts[f"slot_{slot}"]) for slot in range(write_tasks)], write_tasks)
                    observed = Observation()
                    _lake_rows(cached, duplicate_keys, tasks=write_tasks, batch_id=batch_id, by_slot=by_slot).observe(
                        observed, F.count(F.lit(1)).alias("rows")
                    ).write.options(**_LAKE_PARQUET_OPTIONS).partitionBy("event_date", "event_hour").parquet(
                        self._lake_staging(batch_id)
                    )
                    written = int(observed.get["rows"])
                if counts["records_in"] > counts["valid"]:
                    observed = Observation()
                    to_dead_letters(cached, processing_date=processing_date, batch_id=batch_id).coalesce(write_tasks).observe(
                        observed, F.count(F.lit(1)).alias("rows")
                    ).write.options(**_STAGING_WRITE_OPTIONS, compression="snappy").partitionBy("ingest_date").parquet(
                        self._dead_letter_staging(batch_id)
                    )
                    dead_letters_written = int(observed.get["rows"])
            finally:
                cached.unpersist()
        invalid = int(counts["records_in"]) - int(counts["valid"])
        if dead_letters_written != invalid:
            # Checked before anything is published: the batch fails and its replay starts from scratch.
            raise AssertionError(f"batch {batch_id}: {invalid} invalid record(s) but {dead_letters_written} dead letter(s) written")

        files, partitions = self._publish(batch_id) if counts["records_in"] else ([], set())
        if partitions:
            # After the files landed, before the commit marker: compaction never reads an entry whose
            # files are not there, and a replay of this batch writes the same entry again (glue_jobs/partitions_log.py).
            partitions_log.write_entry(self.storage, self.lake_path, source=self.source_name, stream_id=self.stream_id,
                                       batch_id=batch_id, partitions=partitions)
        by_reason = {code: int(counts[code]) for code in REASON_CODES if counts[code]}
        stats = BatchStats(
            source=self.source_name,
            batch_id=batch_id,
            records_in=int(counts["records_in"]),
            records_written=written,
            dead_letters=dead_letters_written,
            duplicates_collapsed=int(counts["valid"]) - written,
            dead_letters_by_reason=by_reason,
            duration_ms=int((self.clock() - started) * 1000),
            files_written=len(files),
        )
        self.storage.write_text(committed, stats.to_json())
        self.storage.delete(self._marker(batch_id, "manifest"))
        self.storage.delete(self._marker(batch_id - MARKERS_KEPT, "committed"))
        self._delete_staging(batch_id)
        log.info(
            "batch %s source=%s in=%s written=%s dead_letters=%s %s duplicates=%s files=%s %sms",
            batch_id, self.source_name, stats.records_in, stats.records_written, stats.dead_letters, by_reason,
            stats.duplicates_collapsed, stats.files_written, stats.duration_ms,
        )
        self.metrics.emit(stats)
        return stats

    def _committed_stats(self, marker: str) -> BatchStats | None:
        """The recorded counts of a committed batch, or None. A marker that is not whole JSON was cut off while
        being written (a local file system shows a file before it is closed; an S3 object appears whole on
        close): the batch did not commit, and its publish manifest, deleted only after the marker, lets the
        replay remove what it had published."""
        if not self.storage.exists(marker):
            return None
        text = self.storage.read_text(marker)
        try:
            return BatchStats.from_json(text)
        except (ValueError, TypeError):
            log.warning("commit marker %s is incomplete (%d bytes); the batch is redone", marker, len(text))
            return None

    def _delete_staging(self, batch_id: int) -> None:
        self.storage.delete(self._lake_staging(batch_id), recursive=True)
        self.storage.delete(self._dead_letter_staging(batch_id), recursive=True)

    def _remove_partial_output(self, batch_id: int) -> None:
        manifest = self._marker(batch_id, "manifest")
        if self.storage.exists(manifest):
            moves = json.loads(self.storage.read_text(manifest))["files"]
            removed = sum(1 for move in moves if self.storage.delete(move["final"]))
            log.warning("batch %s: removed %s file(s) of an interrupted publish", batch_id, removed)
            self.storage.delete(manifest)
        self._delete_staging(batch_id)

    def _staged_files(self, root: str, depth: int) -> list[tuple[str, str]]:
        """(partition sub-path, file path) of the visible Parquet files `depth` directory levels below root,
        in one listing (a glob) rather than one per partition directory."""
        out = []
        for info in self.storage.glob(root + "/*" * depth + "/*.parquet"):
            if info.is_dir:
                continue
            partitions = info.path.rstrip("/").split("/")[-depth - 1:-1]
            out.append(("".join(f"{part}/" for part in partitions), info.path))
        return out

    def _publish(self, batch_id: int) -> tuple[list[str], set[str]]:
        """Move the staged files to their final names; returns them and the lake's hour partitions they went to."""
        moves = []
        partitions: set[str] = set()
        for root, staging, depth in (
            (self.lake_path, self._lake_staging(batch_id), 2),
            (self.dead_letter_path, self._dead_letter_staging(batch_id), 1),
        ):
            per_partition: dict[str, int] = {}
            for rel, path in self._staged_files(staging, depth):
                n = per_partition.get(rel, 0)
                per_partition[rel] = n + 1
                name = f"part-{self.source_name}-{self.stream_id}-b{batch_id:010d}-{n:04d}{PARQUET_SUFFIX}"
                moves.append({"staged": path, "final": f"{root}/{rel}{name}"})
                if root == self.lake_path:
                    partitions.add(rel.rstrip("/"))
        # The manifest is written before the first move, so a crash mid-publish is undone on replay.
        self.storage.write_text(self._marker(batch_id, "manifest"), json.dumps({"files": moves}, indent=1))
        self.storage.rename_files(((move["staged"], move["final"]) for move in moves), threads=PUBLISH_THREADS)
        return [move["final"] for move in moves], partitions
