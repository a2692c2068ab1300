"""The micro-batch function: validate, collapse duplicates, write lake + dead letters exactly once.

`MicroBatchWriter` is what Glue's forEachBatch (and the local runner) calls with each micro-batch. It reads
top to bottom as the batch happens; each step lives in its own module:
- the exactly-once protocol (committed?, discard partial output, staging, publish, commit marker):
  glue_jobs/commit/__init__.py, file operations only;
- the dataset's contract (which records are valid, why the others are not): glue_jobs/contract/typed_contract.py;
- the packed cache every later step reads (counts, duplicate collapse, the rows to write):
  glue_jobs/lake/packed_batch.py;
- the columns the writes add (batch_id, partitions): glue_jobs/lake/lake_layout.py.

Reconciliation: the writes count the rows they write (Observation), records_in = records_written +
dead_letters + duplicates_collapsed, and a batch whose dead letters do not match its rejected records
fails before anything is published (its replay starts from scratch).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import NamedTuple

from pyspark import inheritable_thread_target
from pyspark.sql import DataFrame, Observation

from glue_jobs.commit import BatchCommit, BatchStats, crash_points
from glue_jobs.commit.ownership import claim
from glue_jobs.datasets import Dataset
from glue_jobs.decoding.registry_frames import UNKNOWN_SCHEMA_VERSION
from glue_jobs.lake import dropped_copies, unwritable
from glue_jobs.lake.iceberg_lake import (
    IcebergTarget,
    append_batch,
    batch_tag,
    committed_rows,
    differing_from_table,
    ensure_table,
)
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.packed_batch import BatchCounts, PackedBatch
from glue_jobs.lake.storage import HadoopStorage
from glue_jobs.metrics import MetricsSink, NoOpMetricsSink
from glue_jobs.observed import observed as observed_values
from glue_jobs.observed import row_count
from glue_jobs.session import session_conf

__all__ = ["BatchStats", "MicroBatchWriter", "SHUFFLE_PARTITIONS"]

log = logging.getLogger("glue_jobs.batch")

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Staging writes leave no _SUCCESS marker: the commit marker is the batch's own, staging is deleted after
# publishing, and each marker is one more file to create (a PUT on S3).
STAGING_WRITE_OPTIONS = {"mapreduce.fileoutputcommitter.marksuccessfuljobs": "false"}


def lake_parquet_options(table: LakeTable) -> dict[str, str]:
    """Parquet dictionary encoding only for the lake columns with few distinct values per file
    (LakeTable.dictionary_columns): the batch files live about an hour (compaction rewrites them with
    Parquet's defaults), and a dictionary for near-unique values fills up and falls back to plain encoding
    after hashing every value. Per-column `#name` keys: parquet-mr 1.12+ (Spark 3.3 and later)."""
    columns = table.dictionary_columns()
    if set(columns) - set(table.column_names()):
        raise ValueError(f"dictionary columns {columns} name a column table {table.name} does not have")
    return {**STAGING_WRITE_OPTIONS, "compression": "snappy", "parquet.enable.dictionary": "false",
            **{f"parquet.enable.dictionary#{name}": "true" for name in columns}}


class LakeWritten(NamedTuple):
    """What a batch's lake write did: the rows it wrote, and of the copies it dropped (within the batch, or an Iceberg
    append's keys the table held for the hour already), those whose content differs from the copy kept."""

    rows: int
    differing: int


def write_tasks(spark) -> int:
    """Tasks that read the batch's cache for its writes, and partitions of its shuffles: one per core. The
    writes then need no shuffle, the cores stay evenly busy whatever the input's partition count, and a
    batch writes at most one file per core and partition."""
    return max(1, spark.sparkContext.defaultParallelism)


class MicroBatchWriter:
    """Callable as `(envelope_frame, batch_id) -> BatchStats`; the same object runs in Glue and locally."""

    def __init__(self, spark, *, source_name: str, lake_path: str, dead_letter_path: str, checkpoint_path: str,
                 metrics: MetricsSink | None = None, clock: Callable[[], float] = time.time,
                 stream_id: str | None = None, dataset: Dataset | str | None = None,
                 iceberg: IcebergTarget | None = None, count_replacements: bool = False,
                 query_checkpoint: str | None = None) -> None:
        """`query_checkpoint`: the query's Spark checkpoint when `checkpoint_path` is this dataset's folder inside it (a
        routed source: glue_jobs/routed_batch.py). `iceberg`: where the dataset's Iceberg table is, when its lake is Iceberg in this deployment (the job's
        arguments say so on Glue, its dataset.json locally); its lake rows are then committed to that table
        (glue_jobs/lake/iceberg_lake.py), not staged. `count_replacements`: the source decoded the records' bytes before
        the job (Kinesis): the payloads holding U+FFFD are counted (BatchStats.replacement_characters)."""
        self.spark = spark
        self.table = LakeTable.of(dataset)
        self.count_replacements = count_replacements
        self.iceberg = iceberg
        crash_points.armed()  # a malformed STREAMLAKE_CRASH_AT fails here, not silently
        self.storage = HadoopStorage(spark)
        # Before anything is read or written: the lake and dead letters are this dataset's, the checkpoint this source's
        # (glue_jobs/commit/ownership.py). Several sources may feed one dataset's lake and dead letters.
        dataset = {"dataset": self.table.dataset.name}
        claim(self.storage, lake_path, "lake", dataset)
        claim(self.storage, dead_letter_path, "dead-letter folder", dataset)
        claim(self.storage, checkpoint_path, "checkpoint", {"source": source_name, "datasets": [self.table.dataset.name]})
        if iceberg is not None:
            ensure_table(spark, self.table, iceberg)
        self._parquet_options = lake_parquet_options(self.table)
        self.commit = BatchCommit(self.storage, source_name=source_name, lake_path=lake_path,
                                  dead_letter_path=dead_letter_path, checkpoint_path=checkpoint_path, stream_id=stream_id,
                                  query_checkpoint=query_checkpoint)
        self.source_name = source_name
        self.metrics = metrics or NoOpMetricsSink()
        self.clock = clock

    @property
    def stream_id(self) -> str:
        return self.commit.stream_id

    def __call__(self, envelope: DataFrame, batch_id: int,
                 redecode: Callable[[list[str]], DataFrame | None] | None = None, *, frame_anomalies: int = 0) -> BatchStats:
        """`redecode(version_ids)`: for a source that decodes with a schema-version map (Kafka), called once when the
        batch holds values of versions the map lacks; it returns the batch's envelope decoded again after learning
        a version, or None (those records stay dead letters with unknown_schema_version). A batch its query's stop
        cut short raises unwritable.QueryStopped, which Spark counts as the stop it is."""
        with unwritable.stops_seen(int(batch_id), self.source_name):
            return self._batch(envelope, int(batch_id), redecode, frame_anomalies)

    def _batch(self, envelope: DataFrame, batch_id: int, redecode, frame_anomalies: int) -> BatchStats:
        started = self.clock()
        recorded = self.commit.committed_stats(batch_id)
        if recorded is not None:
            log.info("batch %s of %s was already committed; replay writes nothing", batch_id, self.source_name)
            return replace(recorded, replayed=True)
        self.commit.discard_partial(batch_id)
        tasks = write_tasks(self.spark)
        # Inside a streaming query adaptive execution is off ("spark.sql.adaptive.enabled is not supported in
        # streaming DataFrames/Datasets and will be disabled", logged when the query starts), so Spark's 200
        # shuffle partitions would stay 200. Set on the batch frame's own session (the query's clone of the
        # job's session), where the batch's plans are made.
        with session_conf(envelope.sparkSession, {SHUFFLE_PARTITIONS: str(tasks)}):
            validated = self.table.validate(envelope, now_ms=int(started * 1000), count_replacements=self.count_replacements)
            with PackedBatch(validated, tasks=tasks, table=self.table) as batch:
                counts = batch.counts()
                decoded_again = None
                if redecode is not None and counts.by_reason.get(UNKNOWN_SCHEMA_VERSION):
                    decoded_again = redecode(batch.unknown_versions())
                if decoded_again is None:
                    try:
                        (written, differing), dead_letters = self._write_both(batch, counts, batch_id, started)
                        copies = 0
                    except Exception as error:  # noqa: BLE001 - glue_jobs/lake/unwritable.py raises it again unless a record's
                        (written, differing), dead_letters, copies = self._write_around(validated, batch, counts, batch_id,
                                                                                         started, error)
        if decoded_again is not None:  # nothing was written: the batch starts again, with the versions learned
            log.info("batch %s of %s: learned schema versions from the registry, decoding again", batch_id, self.source_name)
            return self(decoded_again, batch_id, frame_anomalies=frame_anomalies)
        if dead_letters != counts.rejected + copies:
            raise AssertionError(f"batch {batch_id}: {counts.rejected} rejected and {copies} unwritable record(s) but {dead_letters} "
                                 "dead letter(s) written")
        by_reason = {**counts.by_reason, **({unwritable.UNWRITABLE: copies} if copies else {})}
        files = self.commit.publish(batch_id) if counts.records_in else []
        crash_points.reached("after_publish", batch_id)
        stats = BatchStats(
            source=self.source_name, batch_id=batch_id, records_in=counts.records_in, records_written=written,
            dead_letters=dead_letters, duplicates_collapsed=counts.valid - copies - written, dead_letters_by_reason=by_reason,
            duration_ms=int((self.clock() - started) * 1000), files_written=len(files), dataset=self.table.name,
            newest_event_age_seconds=None if counts.newest_event_ms is None or not written else started - counts.newest_event_ms / 1000,
            arrival_lag_ms=None if counts.oldest_arrival_ms is None else max(0, int(started * 1000) - counts.oldest_arrival_ms),
            frame_anomalies=frame_anomalies, unknown_fields=counts.unknown_fields,
            replacement_characters=counts.replacement_characters, differing_duplicates=differing,
        )
        self.commit.mark_committed(stats)
        log.info("batch %s source=%s in=%s written=%s dead_letters=%s %s duplicates=%s (differing %s) files=%s %sms", batch_id,
                 self.source_name, stats.records_in, stats.records_written, stats.dead_letters, stats.dead_letters_by_reason,
                 stats.duplicates_collapsed, stats.differing_duplicates, stats.files_written, stats.duration_ms)
        self.metrics.emit(stats)
        return stats

    def _write_around(self, validated: DataFrame, batch: PackedBatch, counts: BatchCounts, batch_id: int, started: float,
                      error: BaseException) -> tuple[LakeWritten, int, int]:
        """After a failed write: the batch written without the records no write takes, which become dead letters
        (glue_jobs/lake/unwritable.py); (the lake write's LakeWritten, dead letters, unwritable records). Raises `error` when no record is
        to blame."""
        self.commit.discard_partial(batch_id)
        probe_path = f"{self.commit.lake_staging(batch_id)}/_probe"

        def probe(low: int, high: int) -> None:
            rows = self._lake_rows(batch, counts, batch_id, rows_between=(low, high))
            rows.write.mode("overwrite").options(**self._parquet_options).partitionBy("event_date", "event_hour").parquet(probe_path)

        hashes, copies, detail = unwritable.isolate(batch, batch_id, error, probe)
        self.commit.discard_partial(batch_id)  # the probes' staging (the batch's own: nothing else is staged yet)
        crash_points.reached("after_isolation", batch_id)
        extra = unwritable.dead_letters_of(validated, self.table.key, hashes, detail) if hashes else None
        return (*self._write_both(batch, counts, batch_id, started, without_keys=hashes, extra_dead=extra), copies)

    def _lake_rows(self, batch: PackedBatch, counts: BatchCounts, batch_id: int, **narrowed) -> DataFrame:
        return crash_points.unwritable(batch.lake_rows(counts, batch_id=batch_id, **narrowed), self.table.key[0])

    def _write_both(self, batch: PackedBatch, counts: BatchCounts, batch_id: int, started: float, *,
                    without_keys: tuple[int, ...] = (), extra_dead: DataFrame | None = None) -> tuple[LakeWritten, int]:
        """Stage the dead letters while the lake rows are staged; returns (the lake write's LakeWritten, dead letters).

        Two Spark jobs over the same cache at once: the dead letters' tasks and job commit use the slots and the
        driver time the lake write leaves idle (its job commit). Nothing is published before both are done, and a
        failure of either is raised once the other is done (the replay starts from scratch:
        BatchCommit.discard_partial). The thread inherits the batch thread's Spark local properties through
        pyspark's inheritable_thread_target ("recommended to be used in PySpark when the pinned thread mode is
        enabled": it "inherits the inheritable properties specific to JVM thread such as InheritableThreadLocal").
        An Iceberg lake keeps the order lake, then dead letters."""
        any_dead = counts.rejected or extra_dead is not None
        if self.iceberg is not None:  # in order: a kill right after the table's commit finds no dead letter staged
            written = self._write_lake(batch, counts, batch_id, without_keys) if counts.valid else LakeWritten(0, 0)
            crash_points.reached("after_lake_commit", batch_id)
            return written, self._write_dead_letters(batch, counts, batch_id, started, extra_dead) if any_dead else 0
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dead-letters") as pool:
            # Wrapped here, in the batch's thread: the wrapper captures the local properties when it is made.
            dead = pool.submit(inheritable_thread_target(self._write_dead_letters), batch, counts, batch_id, started, extra_dead) if any_dead else None
            written = self._write_lake(batch, counts, batch_id, without_keys) if counts.valid else LakeWritten(0, 0)  # `with` waits for `dead`
            crash_points.reached("after_lake_commit", batch_id)
            return written, dead.result() if dead is not None else 0

    def _write_lake(self, batch: PackedBatch, counts: BatchCounts, batch_id: int, without_keys: tuple[int, ...] = ()) -> LakeWritten:
        """Stage the batch's lake rows as Parquet partitioned by hour (an Iceberg table: commit them, once per
        batch id); returns the rows written and how many copies it dropped differ from the copy kept."""
        dropped = Observation() if dropped_copies.ranked_keys(counts, without_keys) != "[]" else None  # glue_jobs/lake/dropped_copies.py
        rows = self._lake_rows(batch, counts, batch_id, without_keys=without_keys, dropped=dropped)
        if self.iceberg is not None:
            tag = batch_tag(self.source_name, self.stream_id, batch_id)
            # The batch's own session (the query's clone): the catalog that commits is the one that looks.
            recorded = committed_rows(rows.sparkSession, self.iceberg, tag)
            held_hours = None  # a replay: which hours held a key is not known, every hour of the batch is looked at
            if recorded is not None:
                log.info("batch %s of %s: its Iceberg append %s is committed already", batch_id, self.source_name, tag)
                if dropped is not None:
                    rows.count()  # the copies dropped within the batch, counted as the attempt that committed counted them
                written = recorded
            else:
                written, held_hours = append_batch(self.table, self.iceberg, rows, tag,
                                                   (counts.oldest_event_ms, counts.newest_event_ms))
            losers, differing = dropped_copies.counted(dropped) or (None, 0)
            return LakeWritten(written, differing + self._differing_from_table(
                batch, counts, batch_id, without_keys, written, losers, held_hours))
        observed = Observation()
        rows.observe(observed, row_count()).write.options(**self._parquet_options).partitionBy(
            "event_date", "event_hour").parquet(self.commit.lake_staging(batch_id))
        written = int(observed_values(observed, "rows")["rows"])
        return LakeWritten(written, (dropped_copies.counted(dropped) or (0, 0))[1])

    def _differing_from_table(self, batch: PackedBatch, counts: BatchCounts, batch_id: int, without_keys: tuple[int, ...],
                              written: int, losers: int | None = None, held_hours: tuple[int, ...] | None = None) -> int:
        """Of the rows an Iceberg append left out because the table held their key for the hour already, those whose
        content differs from the row the table holds (iceberg_lake.differing_from_table): looked for only when the
        append left rows out (`losers`: the copies dropped within the batch; None when they were not observed, then
        whenever the batch wrote fewer rows than it holds valid ones), in the hours it left them out of (`held_hours`,
        None: every hour of the batch)."""
        if counts.valid - (losers or 0) - written <= 0:  # rows left out as unwritable (without_keys) only cost a look
            return 0
        rows = self._lake_rows(batch, counts, batch_id, without_keys=without_keys)
        return differing_from_table(self.table, self.iceberg, rows, (counts.oldest_event_ms, counts.newest_event_ms),
                                    held_hours)

    def _write_dead_letters(self, batch: PackedBatch, counts: BatchCounts, batch_id: int, started: float,
                            extra: DataFrame | None = None) -> int:
        """Stage the batch's dead letters partitioned by ingest date; returns the rows written."""
        observed = Observation()
        processing_date = time.strftime("%Y-%m-%d", time.gmtime(started))
        batch.dead_letters(counts, batch_id=batch_id, processing_date=processing_date, extra=extra).observe(
            observed, row_count()).write.options(**STAGING_WRITE_OPTIONS, compression="snappy").partitionBy(
            "ingest_date").parquet(self.commit.dead_letter_staging(batch_id))
        return int(observed_values(observed, "rows")["rows"])
