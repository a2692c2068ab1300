"""The local runner: Spark Structured Streaming over a directory of NDJSON files, same batch function as Glue.

Files are read whole (text source, wholetext=true) so each record keeps its file and line number; the
checkpoint is a real Spark checkpoint, so a stopped or killed run resumes where it left off, and the
batch writer's commit markers make a replayed batch write nothing twice.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from glue_jobs.batch import BatchStats, MicroBatchWriter
from glue_jobs.commit.run_summary import RunResults
from glue_jobs.decoding.routes import RouteTable
from glue_jobs.metrics import LogMetricsSink
from glue_jobs.session import local_session, session_conf
from glue_jobs.sources import from_local_files

DEFAULT_SOURCE = "local"
READ_TASKS_PER_CORE = 4
# A micro-batch's files are listed on the driver up to this many: past 32 paths (its default) Spark starts
# a distributed listing job, which costs a local micro-batch far more than the listing itself.
DRIVER_LISTING_MAX_PATHS = 100_000
_COUNTERS = ("records_in", "records_written", "dead_letters", "duplicates_collapsed", "differing_duplicates", "unknown_fields")  # summed from BatchStats


def _session_settings(spark) -> dict[str, str]:
    """Session settings for the run, restored afterwards (each micro-batch is planned with the live conf):
    - at least READ_TASKS_PER_CORE read partitions per core (`spark.sql.files.minPartitionNum`; Spark's
      default is one per core): input files are read whole (one row per file), so a read partition holds
      whole files; one per core left a core idle whenever files did not split evenly (50 files of 3 MB: 3
      tasks on 2 cores), and fixed small partitions (16 MB, before) made many short tasks (25 for the same
      files) whose overhead cost more (docs/streaming-job.md);
    - a batch's files listed on the driver (DRIVER_LISTING_MAX_PATHS)."""
    return {
        "spark.sql.files.minPartitionNum": str(READ_TASKS_PER_CORE * max(1, spark.sparkContext.defaultParallelism)),
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(DRIVER_LISTING_MAX_PATHS),
    }


@dataclass
class RunSummary(RunResults[BatchStats]):
    """The BatchStats of each micro-batch of the run (of each part of a routed source's batch: `routed`, its lines then
    name each part's dataset)."""

    routed: bool = False

    def add(self, stats: BatchStats) -> None:
        self.results.append(stats)

    def totals(self) -> dict:
        """The run's counts, as the summary line prints them."""
        by_reason: dict[str, int] = {}
        for stats in self.results:
            for reason, count in stats.dead_letters_by_reason.items():
                by_reason[reason] = by_reason.get(reason, 0) + count
        return {
            # A routed source's batch has a BatchStats per dataset and one for its unroutable records.
            "batches": len({stats.batch_id for stats in self.results}),
            "replayed_batches": len({stats.batch_id for stats in self.results if stats.replayed}),
            **{counter: self.total(counter) for counter in _COUNTERS},
            "dead_letters_by_reason": by_reason,
            "seconds": self.seconds,
        }

    def render(self) -> str:
        t = self.totals()
        reasons = ", ".join(f"{r}={c}" for r, c in sorted(t["dead_letters_by_reason"].items())) or "none"
        replayed = f" (replayed {t['replayed_batches']})" if t["replayed_batches"] else ""
        # Records whose unknown fields were kept or dropped (dataset.json unknown_fields), when there are any.
        unknown = f" unknown_fields={t['unknown_fields']}" if t["unknown_fields"] else ""
        # Of the duplicates, the copies whose content differed from the copy kept (docs/datasets.md, "Duplicates").
        differing = f" ({t['differing_duplicates']} differing from the copy kept)" if t["differing_duplicates"] else ""
        rate = t["records_in"] / self.seconds if self.seconds else 0.0
        return (
            f"summary: records={t['records_in']} written={t['records_written']} dead_letters={t['dead_letters']} "
            f"({reasons}) duplicates={t['duplicates_collapsed']}{differing}{unknown} batches={t['batches']}{replayed} "
            f"seconds={self.seconds:.1f} records_per_second={rate:.0f}"
        )


# The namespace of local Iceberg tables in the local catalog (glue_jobs/session.py LOCAL_ICEBERG_CATALOG).
LOCAL_ICEBERG_NAMESPACE = "streamlake_local"


def local_iceberg_target(dataset: str | None):
    """Where the local runners put a dataset's Iceberg table (None: the dataset's lake is Parquet):
    `lake.streamlake_local.<dataset>`, in the JDBC catalog under the lake directory."""
    from glue_jobs.lake.iceberg_lake import IcebergTarget
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.session import LOCAL_ICEBERG_CATALOG

    table = LakeTable.of(dataset)
    if table.dataset.table_format != "iceberg":
        return None
    return IcebergTarget(LOCAL_ICEBERG_CATALOG, LOCAL_ICEBERG_NAMESPACE, table.name)


def local_spark_session(app_name: str = "streamlake-local", *, iceberg_warehouse: str | None = None):
    """`iceberg_warehouse`: the lake directory of an Iceberg dataset (its local catalog lives there)."""
    cores = os.cpu_count() or 2
    return local_session(app_name, master=os.environ.get("STREAMLAKE_SPARK_MASTER", "local[*]"),
                         iceberg_warehouse=iceberg_warehouse, settings={
        "spark.driver.memory": os.environ.get("STREAMLAKE_DRIVER_MEMORY", "2g"),
        "spark.sql.shuffle.partitions": str(max(2, cores)),
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    })


def run_local(
    *,
    input_dir: str,
    lake_dir: str,
    dead_letter_dir: str,
    checkpoint_dir: str,
    once: bool = False,
    max_files_per_batch: int | None = None,
    source_name: str = DEFAULT_SOURCE,
    trigger_seconds: int = 5,
    dataset: str | None = None,
    routes: RouteTable | None = None,
    spark=None,
    out: TextIO = sys.stdout,
    progress: bool = True,
) -> RunSummary:
    """`routes`: the records are several datasets, routed by a field (glue_jobs/routed_batch.py): each dataset's lake
    and dead letters are the folders named after it under `lake_dir` and `dead_letter_dir`, the records no route takes
    are the dead letters in `dead_letter_dir`/unroutable; `dataset` is then None."""
    if not Path(input_dir).is_dir():
        raise FileNotFoundError(f"input directory {input_dir} does not exist (or is not a directory)")
    _make_folders({"--lake": lake_dir, "--dead-letter": dead_letter_dir, "--checkpoint": checkpoint_dir})
    if routes is not None and dataset is not None:
        raise ValueError("a routed run takes its datasets from its routes, not from a dataset")
    icebergs = {name: local_iceberg_target(name) for name in (routes.datasets if routes is not None else (dataset,))}
    spark = spark or local_spark_session(iceberg_warehouse=lake_dir if any(icebergs.values()) else None)
    lake, dead, checkpoint = (str(Path(folder).resolve()) for folder in (lake_dir, dead_letter_dir, checkpoint_dir))
    if routes is not None:
        from glue_jobs.routed_batch import RoutedWriter
        writer = RoutedWriter.under(spark, source_name=source_name, routes=routes, lake_root=lake, dead_letter_root=dead,
                                    checkpoint_path=checkpoint, icebergs=icebergs, metrics=LogMetricsSink())
    else:
        writer = MicroBatchWriter(spark, source_name=source_name, lake_path=lake, dead_letter_path=dead, checkpoint_path=checkpoint,
                                  metrics=LogMetricsSink(), dataset=dataset, iceberg=icebergs[dataset])
    summary, started = RunSummary(routed=routes is not None), time.time()
    printed = _batch_printer(summary, started, out, progress)

    def on_batch(raw, batch_id: int) -> None:
        done = writer(from_local_files(raw, source_name, int(time.time() * 1000)), batch_id)
        for stats in done if isinstance(done, list) else [done]:
            printed(stats)

    reader = spark.readStream.format("text").option("wholetext", "true")
    if max_files_per_batch:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_batch))
    stream = reader.load(str(Path(input_dir).resolve()))
    with session_conf(spark, _session_settings(spark)):
        _run_query(stream, on_batch, checkpoint_dir=checkpoint_dir, once=once, trigger_seconds=trigger_seconds,
                   name=f"streamlake-{source_name}", out=out)
    from glue_jobs.sources.local_inputs import unread_inputs

    return _finish(summary, started, lake_dir, dead_letter_dir, checkpoint_dir, out,
                   notes=unread_inputs(input_dir, checkpoint_dir))


def _make_folders(folders: dict[str, str]) -> None:
    """Each option's folder, created where absent; a file in its place, or a folder that cannot be made, is one line
    naming the option (NotADirectoryError, PermissionError: the command line turns them into its usage error)."""
    for option, path in folders.items():
        if Path(path).exists() and not Path(path).is_dir():
            raise NotADirectoryError(f"{option} {path} is a file; it must be a folder (or not exist yet)")
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise PermissionError(f"{option} {path}: cannot create the folder ({error.strerror})") from None


def _batch_printer(summary: RunSummary, started: float, out: TextIO, progress: bool = True):
    """Adds each batch's counts to `summary`; with `progress`, prints them as the batch ends."""
    def printed(stats: BatchStats) -> None:
        summary.add(stats)
        if not progress:
            return
        part = f" {stats.dataset or 'unroutable'}" if summary.routed else ""
        print(
            f"batch {stats.batch_id}{part}: in={stats.records_in} written={stats.records_written} "
            f"dead_letters={stats.dead_letters} duplicates={stats.duplicates_collapsed} "
            f"{f'({stats.differing_duplicates} differing) ' if stats.differing_duplicates else ''}"
            f"{'replayed, nothing rewritten ' if stats.replayed else ''}{stats.duration_ms} ms | "
            f"total {summary.total('records_in')} records in {time.time() - started:.1f} s",
            file=out,
            flush=True,
        )

    return printed


def _run_query(stream, on_batch, *, checkpoint_dir: str, once: bool, trigger_seconds: int, name: str, out: TextIO,
               started_query=None) -> None:
    """Run the foreachBatch query until it ends (once: all that is available now) or SIGTERM / Ctrl-C stops it.
    `started_query(query)`, if given, gets the running query (the tests stop it when they have seen enough)."""
    writer_stream = stream.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(Path(checkpoint_dir).resolve()))
    writer_stream = (
        writer_stream.trigger(availableNow=True) if once else writer_stream.trigger(processingTime=f"{trigger_seconds} seconds")
    )
    previous_handler = signal.signal(signal.SIGTERM, _interrupt) if _main_thread() else None
    try:
        query = writer_stream.queryName(name).start()
        if started_query is not None:
            started_query(query)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            print("stopping: the checkpoint keeps the position; run again to resume", file=out, flush=True)
            query.stop()
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _finish(summary: RunSummary, started: float, lake_dir: str, dead_letter_dir: str, checkpoint_dir: str,
            out: TextIO, notes: list[str] = ()) -> RunSummary:
    summary.seconds = time.time() - started
    print(summary.render(), file=out, flush=True)
    for note in notes:  # inputs the source did not read (glue_jobs/sources/local_inputs.py)
        print(note, file=out, flush=True)
    print(f"lake: {lake_dir}  dead letters: {dead_letter_dir}  checkpoint: {checkpoint_dir}", file=out, flush=True)
    return summary


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def configure_logging() -> None:
    logging.basicConfig(level=os.environ.get("STREAMLAKE_LOG_LEVEL", "WARNING"), format="%(levelname)s %(name)s %(message)s")
