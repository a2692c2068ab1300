"""The compaction run: recover unfinished work, find the hours that need compaction, compact each one.

Per partition (docs/compaction.md has the why of each step and what recovery does after a kill):

    list inputs -> plan.json -> read exactly those files -> drop duplicate event_ids -> write staging
    -> count staged rows == input rows - duplicates -> staged.json (commit point) -> publish outputs
    into the partition -> delete the inputs -> history record -> remove journal and staging

Nothing is ever written to a path that is being read: inputs are read from the partition, outputs
are written to staging and only moved into the partition, under names no input can have.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from compaction import layout
from compaction.faults import FaultInjector
from compaction.journal import PLAN, STAGED, Journal
from compaction.layout import HourPartition, LakePaths
from compaction.metrics import (
    DUPLICATES_REMOVED,
    DURATION,
    FILES_AFTER,
    FILES_BEFORE,
    PARTITIONS,
    RECOVERED,
    ROWS_WRITTEN,
    SUCCEEDED,
    LogMetricSink,
    Metric,
    MetricSink,
)
from compaction.transforms import DUPLICATE_RANK, data_schema, drop_ranked_duplicates, rank_duplicates
from glue_jobs import partitions_log
from glue_jobs.session import session_conf
from glue_jobs.storage import FileInfo, HadoopStorage

log = logging.getLogger("compaction")

MB = 1024 * 1024
# A lone file at least this share of the target is left alone (rewriting it gains nothing).
NEAR_TARGET_SHARE = 0.75
# Staged files whose average size is outside this band of the target are re-staged once with the file
# count the measured size calls for (the first count is an estimate from the input bytes).
SIZE_BAND = (0.5, 1.5)
# Output bytes per input byte before any run has measured it: small files carry per-file overhead
# (footer, one dictionary per column chunk), so compacted output is usually smaller; 1.0 errs towards
# more, smaller files, which the re-stage corrects.
DEFAULT_BYTES_RATIO = 1.0
BYTES_RATIO_LIMITS = (0.02, 2.0)
MAX_OUTPUT_FILES = 10_000
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


class CompactionError(RuntimeError):
    """A partition could not be compacted safely (e.g. staged rows do not add up)."""


@dataclass(frozen=True)
class CompactionSettings:
    lake_path: str
    target_file_bytes: int = 128 * MB
    grace_minutes: int = 15
    lookback_hours: int = 48
    hour: datetime | None = None  # compact this hour only (UTC start), whatever the lookback
    # Which partitions a run looks at: by default those the partitions log names (what the streaming job
    # wrote, of any age); `scan` looks at every hour of the lookback window instead (an operator's tool,
    # e.g. for files written by something other than the streaming job). `hour` overrides both.
    scan: bool = False
    environment: str = "local"
    delete_threads: int = 8

    def __post_init__(self) -> None:
        if self.target_file_bytes < 1024:
            raise ValueError(f"target_file_bytes must be at least 1024, got {self.target_file_bytes}")
        if self.grace_minutes < 0:
            raise ValueError(f"grace_minutes must be 0 or more, got {self.grace_minutes}")
        if self.lookback_hours < 1:
            raise ValueError(f"lookback_hours must be at least 1, got {self.lookback_hours}")


@dataclass
class PartitionResult:
    partition: str
    action: str  # compacted | skipped | rolled_forward | rolled_back | failed
    reason: str = ""
    run_id: str = ""
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_in: int = 0
    rows_out: int = 0
    duplicates: int = 0
    restaged: bool = False
    inputs_left: int = 0  # inputs changed after listing, kept for the next run
    seconds: float = 0.0
    error: str = ""


@dataclass
class RunSummary:
    run_id: str
    results: list[PartitionResult] = field(default_factory=list)
    seconds: float = 0.0

    def of(self, *actions: str) -> list[PartitionResult]:
        return [r for r in self.results if r.action in actions]

    @property
    def succeeded(self) -> bool:
        return not self.of("failed")

    def metrics(self) -> list[Metric]:
        compacted = self.of("compacted")
        return [
            Metric(PARTITIONS, len(compacted)),
            Metric(FILES_BEFORE, sum(r.files_before for r in compacted)),
            Metric(FILES_AFTER, sum(r.files_after for r in compacted)),
            Metric(ROWS_WRITTEN, sum(r.rows_out for r in compacted)),
            Metric(DUPLICATES_REMOVED, sum(r.duplicates for r in compacted)),
            Metric(RECOVERED, len(self.of("rolled_forward", "rolled_back"))),
            Metric(DURATION, round(self.seconds * 1000), "Milliseconds"),
            Metric(SUCCEEDED, 1 if self.succeeded else 0),
        ]


# ---- discovery ----------------------------------------------------------------------------------


def compaction_reason(files: list[FileInfo], target_file_bytes: int) -> tuple[bool, str]:
    """Whether a closed partition's data files need compacting, and why (or why not)."""
    if not files:
        return False, "no data files"
    writers = {layout.output_run_id(f.name) for f in files}
    if None not in writers and len(writers) == 1:
        return False, "already compacted"
    if len(files) == 1 and files[0].size >= NEAR_TARGET_SHARE * target_file_bytes:
        return False, "one file near the target size"
    if None in writers and len(writers) > 1:
        return True, f"{len(files)} files, late data since the last compaction"
    if len(files) == 1:
        return True, "one file under the target size"
    return True, f"{len(files)} files"


def data_files(storage: HadoopStorage, path: str) -> list[FileInfo]:
    return [f for f in storage.list_quick(path) if not f.is_dir and layout.is_data_file(f.name)]


def last_closed_hour(now: datetime, grace_minutes: int) -> datetime:
    """Start of the newest hour that closed at least grace_minutes ago."""
    return (now - timedelta(minutes=grace_minutes)).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def check_hour_closed(settings: CompactionSettings, now: datetime) -> None:
    if settings.hour is not None and settings.hour > last_closed_hour(now, settings.grace_minutes):
        closes = settings.hour + timedelta(hours=1, minutes=settings.grace_minutes)
        raise ValueError(
            f"hour {settings.hour:%Y-%m-%dT%H} is not closed yet: it can be compacted from "
            f"{closes:%Y-%m-%dT%H:%M}Z (end of the hour + grace_minutes={settings.grace_minutes})"
        )


def logged_partitions(storage: HadoopStorage, paths: LakePaths, entries: list[partitions_log.LogEntry],
                      newest: datetime) -> list[tuple[HourPartition, list[FileInfo]]]:
    """(partition, data files) of the closed hours the partitions log names, oldest first: one listing per
    partition, however many entries name it and however old it is."""
    touched = set()
    for entry in entries:
        for key in entry.partitions:
            date_dir, _, hour_dir = key.partition("/")
            partition = HourPartition.from_dirs(date_dir, hour_dir)
            if partition is not None and partition.start <= newest:
                touched.add(partition)
    return [(p, data_files(storage, paths.partition(p))) for p in sorted(touched)]


def find_partitions(storage: HadoopStorage, paths: LakePaths, settings: CompactionSettings, now: datetime):
    """(partition, data files) of the closed hours to look at, oldest first.

    Without settings.hour: every hour partition from `lookback_hours` before now up to the last closed
    hour. The lookback is what catches late data in older hours: their new files make them qualify again.
    """
    newest = last_closed_hour(now, settings.grace_minutes)
    if settings.hour is not None:
        check_hour_closed(settings, now)
        oldest = newest_allowed = settings.hour
    else:
        oldest = (now - timedelta(hours=settings.lookback_hours)).replace(minute=0, second=0, microsecond=0)
        newest_allowed = newest
    found = []
    day = oldest.replace(hour=0)
    while day <= newest_allowed:
        date_dir = f"event_date={day:%Y-%m-%d}"
        for hour_dir in storage.list(f"{paths.root}/{date_dir}"):
            partition = HourPartition.from_dirs(date_dir, hour_dir.name)
            if hour_dir.is_dir and partition is not None and oldest <= partition.start <= newest_allowed:
                found.append((partition, data_files(storage, hour_dir.path)))
        day += timedelta(days=1)
    return sorted(found, key=lambda item: item[0])


# ---- the run ------------------------------------------------------------------------------------


class Compactor:
    def __init__(
        self,
        spark,
        settings: CompactionSettings,
        *,
        sink: MetricSink | None = None,
        faults: FaultInjector | None = None,
        now: datetime | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.storage = HadoopStorage(spark)
        self.paths = LakePaths(self.storage.qualify(settings.lake_path.rstrip("/")))
        self.journal = Journal(self.storage, self.paths)
        self.sink = sink if sink is not None else LogMetricSink(settings.environment)
        self.faults = faults if faults is not None else FaultInjector()
        self.now = now or datetime.now(timezone.utc)
        check_hour_closed(settings, self.now)
        self.run_id = layout.new_run_id(self.now)
        self._bytes_ratio = self._read_bytes_ratio()
        self._measured_ratios: list[float] = []

    def run(self) -> RunSummary:
        started = time.monotonic()
        summary = RunSummary(self.run_id)
        try:
            summary.results += self.recover()
            self._sweep_orphaned_staging()
            from_log = self.settings.hour is None and not self.settings.scan
            if from_log:
                entries = partitions_log.read_entries(self.storage, self.paths.root)
                self.faults.point("log_read")
                candidates = logged_partitions(self.storage, self.paths, entries,
                                               last_closed_hour(self.now, self.settings.grace_minutes))
            else:
                candidates = find_partitions(self.storage, self.paths, self.settings, self.now)
            done = set()
            for partition, files in candidates:
                needed, reason = compaction_reason(files, self.settings.target_file_bytes)
                if not needed:
                    result = PartitionResult(partition.key, "skipped", reason, files_before=len(files))
                else:
                    result = self.compact_partition(partition, files, reason)
                summary.results.append(result)
                if result.action != "failed":
                    done.add(partition.key)
            self._write_bytes_ratio()
            if from_log:
                self.faults.point("log_compacted")
                self._advance_log(entries, done)
        except BaseException:
            summary.seconds = time.monotonic() - started
            summary.results.append(PartitionResult("(run)", "failed", error="run aborted"))
            self._publish_metrics(summary)
            raise
        summary.seconds = time.monotonic() - started
        self._publish_metrics(summary)
        return summary

    def _advance_log(self, entries: list[partitions_log.LogEntry], done: set[str]) -> None:
        """After the partitions are published: each entry loses the partitions compacted (or found compact);
        an entry with nothing left goes. A failed or not yet closed partition stays for the next run."""
        for entry in entries:
            partitions_log.keep_only(self.storage, entry, [p for p in entry.partitions if p not in done])
            self.faults.point("log_advance", entry=entry.path)

    def _publish_metrics(self, summary: RunSummary) -> None:
        try:
            self.sink.publish(summary.metrics())
        except Exception:  # metrics must not turn a good compaction into a failed run
            log.exception("could not publish the compaction metrics")

    # ---- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[PartitionResult]:
        """Finish (roll forward) or undo (roll back) what killed runs left, before any new work."""
        results = []
        for pending in self.journal.pending():
            started = time.monotonic()
            record = pending.staged
            if record is not None:
                result = self._finish(pending.partition, record, action="rolled_forward")
                result.reason = "staged.json found: published and deleted what was left"
            else:
                self._roll_back(pending.run_id, pending.partition)
                plan = pending.plan or {}
                result = PartitionResult(pending.partition.key, "rolled_back", run_id=pending.run_id,
                                         reason="no staged.json: staging removed, inputs untouched",
                                         files_before=len(plan.get("inputs", [])))
            result.seconds = time.monotonic() - started
            log.info("recovered %s of run %s: %s", pending.partition, pending.run_id, result.action)
            results.append(result)
        return results

    def _roll_back(self, run_id: str, partition: HourPartition) -> None:
        self.storage.delete(self.paths.staging(run_id, partition), recursive=True)
        self.journal.forget(run_id, partition)
        self._remove_empty_staging_run(run_id)

    def _sweep_orphaned_staging(self) -> None:
        """Staging of runs with no journal left (e.g. a crash while removing it) holds nothing needed."""
        pending_runs = {p.run_id for p in self.journal.pending()}
        for run_dir in self.storage.list(self.paths.staging_root):
            if run_dir.is_dir and run_dir.name not in pending_runs and run_dir.name != self.run_id:
                self.storage.delete(run_dir.path, recursive=True)

    def _remove_empty_staging_run(self, run_id: str) -> None:
        run_dir = f"{self.paths.staging_root}/{run_id}"
        for date_dir in self.storage.list(run_dir, include_hidden=True):
            if not self.storage.list(date_dir.path, include_hidden=True):
                self.storage.delete(date_dir.path, recursive=True)
        if self.storage.exists(run_dir) and not self.storage.list(run_dir, include_hidden=True):
            self.storage.delete(run_dir, recursive=True)

    # ---- one partition ----------------------------------------------------------------------------

    def compact_partition(self, partition: HourPartition, inputs: list[FileInfo], reason: str = "") -> PartitionResult:
        started = time.monotonic()
        committed = False
        try:
            plan = {
                "run_id": self.run_id,
                "partition": partition.key,
                "lake": self.paths.root,
                "created_at": self.now.isoformat(),
                "target_file_bytes": self.settings.target_file_bytes,
                "inputs": [{"name": f.name, "size": f.size, "modified_ms": f.modified_ms} for f in inputs],
            }
            self.journal.write(self.run_id, partition, PLAN, plan)
            self.faults.point("after_plan", partition=partition.key)

            staged = self._stage(partition, inputs)
            self.faults.point("after_stage", partition=partition.key)

            record = {**plan, **staged}
            self.journal.write(self.run_id, partition, STAGED, record)
            committed = True
            self.faults.point("after_commit", partition=partition.key)

            result = self._finish(partition, record, action="compacted")
        except Exception as exc:
            log.exception("compaction of %s failed", partition)
            if not committed:
                with contextlib.suppress(Exception):
                    self._roll_back(self.run_id, partition)
            return PartitionResult(partition.key, "failed", reason, run_id=self.run_id, files_before=len(inputs),
                                   error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
        result.reason = reason
        result.seconds = time.monotonic() - started
        return result

    def _read_exactly(self, paths: list[str]):
        """A frame over exactly these files, never their directory; the explicit schema means no footer
        is read to infer one, and the partition columns come from the directory, not the files."""
        with self._listing_parallelism():
            return self.spark.read.schema(data_schema()).parquet(*paths)

    def _listing_parallelism(self):
        # Spark checks explicitly listed files with a parallel job of one task per path (up to 10,000)
        # once there are more than 32; thousands of one-file tasks cost far more than the check. The
        # cluster's parallelism keeps the listing parallel on S3 without the per-task overhead.
        return session_conf(self.spark, {_LISTING_PARALLELISM: str(max(1, self.spark.sparkContext.defaultParallelism))})

    def _estimate_file_count(self, inputs: list[FileInfo]) -> int:
        compacted = sum(f.size for f in inputs if layout.output_run_id(f.name))
        other = sum(f.size for f in inputs if not layout.output_run_id(f.name))
        estimate = compacted + other * self._bytes_ratio
        return min(MAX_OUTPUT_FILES, max(1, round(estimate / self.settings.target_file_bytes)))

    def _stage(self, partition: HourPartition, inputs: list[FileInfo]) -> dict:
        """Write the deduplicated rows to staging and verify them; the journal's staged fields."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        staging = self.paths.staging(self.run_id, partition)
        target = self.settings.target_file_bytes
        file_count = self._estimate_file_count(inputs)
        observation = Observation(f"compaction_{partition.date_dir}_{partition.hour_dir}".replace("=", "_"))
        ranked = (
            self._read_exactly([f.path for f in inputs])
            .repartition(file_count, "event_id")  # one shuffle: sizes the output and groups each event_id
            .transform(rank_duplicates)
            .observe(observation, F.count(F.lit(1)).alias("rows_in"),
                     F.sum((F.col(DUPLICATE_RANK) > 1).cast("long")).alias("duplicates"))
        )
        attempt = f"{staging}/attempt-1"
        self.faults.watch_staging(lambda: self.storage.exists(staging))
        drop_ranked_duplicates(ranked).write.option("compression", "snappy").parquet(attempt)
        observed = observation.get
        rows_in, duplicates = int(observed["rows_in"]), int(observed["duplicates"] or 0)
        files, rows_out = self._verify_staged(attempt, rows_in - duplicates)

        staged_bytes = sum(f.size for f in files)
        if not any(layout.output_run_id(f.name) for f in inputs) and inputs and sum(f.size for f in inputs):
            self._measured_ratios.append(staged_bytes / sum(f.size for f in inputs))
        restaged = False
        ideal = min(MAX_OUTPUT_FILES, max(1, round(staged_bytes / target)))
        average = staged_bytes / max(1, len(files))
        if files and ideal != len(files) and not SIZE_BAND[0] * target <= average <= SIZE_BAND[1] * target:
            log.info("%s: %d staged files average %.1f MB, re-staging as %d", partition, len(files), average / MB, ideal)
            attempt = f"{staging}/attempt-2"
            (
                self._read_exactly([f.path for f in files])
                .repartition(ideal, "event_id")
                .sortWithinPartitions("event_id")
                .write.option("compression", "snappy")
                .parquet(attempt)
            )
            files, _ = self._verify_staged(attempt, rows_out)
            restaged = True
        return {
            "rows_in": rows_in,
            "duplicates": duplicates,
            "rows_out": rows_out,
            "restaged": restaged,
            "outputs": [
                {"staged": f.path, "name": layout.output_name(self.run_id, i), "size": f.size}
                for i, f in enumerate(files)
            ],
        }

    def _verify_staged(self, directory: str, expected_rows: int) -> tuple[list[FileInfo], int]:
        files = data_files(self.storage, directory)
        rows = self._read_exactly([f.path for f in files]).count() if files else 0
        if rows != expected_rows:
            raise CompactionError(
                f"staged {rows} rows in {directory}, expected {expected_rows} (input rows - duplicates); "
                "nothing was published"
            )
        return files, rows

    def _finish(self, partition: HourPartition, record: dict, *, action: str) -> PartitionResult:
        """Publish, delete inputs, record history, clean up. Idempotent: recovery calls it again after a kill."""
        run_id = record["run_id"]
        partition_dir = self.paths.partition(partition)
        for output in record["outputs"]:
            published = f"{partition_dir}/{output['name']}"
            if self.storage.exists(published):
                # Published before a kill (on S3 a move is copy + delete: the copy may still be in staging).
                self.storage.delete(output["staged"])
            elif self.storage.exists(output["staged"]):
                self.storage.rename(output["staged"], published)
            else:
                raise CompactionError(f"{partition}: output {output['name']} is neither staged nor published")
            self.faults.point("publish", partition=partition.key)
        self.faults.point("after_publish", partition=partition.key)

        listed = {f["name"]: f for f in record["inputs"]}
        current = {f.name: f for f in data_files(self.storage, partition_dir)}
        unchanged = [c for name, c in current.items()
                     if name in listed and (c.size, c.modified_ms) == (listed[name]["size"], listed[name]["modified_ms"])]
        unchanged_names = {c.name for c in unchanged}  # a set: thousands of inputs per partition
        changed = sorted(name for name in current if name in listed and name not in unchanged_names)
        if changed:
            # Rewritten after it was read (e.g. a replayed streaming batch): its rows may differ from what
            # was compacted, so it stays and the next run compacts it (duplicates are removed then).
            log.warning("%s: %d input(s) changed since listed, left for the next run: %s", partition, len(changed),
                        ", ".join(changed[:5]))
        self.storage.delete_files([c.path for c in unchanged], threads=self.settings.delete_threads,
                                  on_deleted=lambda _: self.faults.point("delete", partition=partition.key))
        self.faults.point("after_delete", partition=partition.key)

        self.journal.write_history(partition, {**record, "finished_at": datetime.now(timezone.utc).isoformat(),
                                               "finished_by": self.run_id, "inputs_left": changed})
        self.faults.point("after_history", partition=partition.key)
        self.storage.delete(self.paths.staging(run_id, partition), recursive=True)
        self._remove_empty_staging_run(run_id)
        self.journal.forget(run_id, partition)
        return PartitionResult(
            partition.key, action, run_id=run_id,
            files_before=len(record["inputs"]), files_after=len(record["outputs"]),
            bytes_before=sum(f["size"] for f in record["inputs"]), bytes_after=sum(o["size"] for o in record["outputs"]),
            rows_in=record["rows_in"], rows_out=record["rows_out"], duplicates=record["duplicates"],
            restaged=record.get("restaged", False), inputs_left=len(changed),
        )

    # ---- sizing -------------------------------------------------------------------------------------

    def _read_bytes_ratio(self) -> float:
        import json

        with contextlib.suppress(Exception):
            ratio = float(json.loads(self.storage.read_text(self.paths.sizing))["bytes_ratio"])
            if math.isfinite(ratio):
                return min(max(ratio, BYTES_RATIO_LIMITS[0]), BYTES_RATIO_LIMITS[1])
        return DEFAULT_BYTES_RATIO

    def _write_bytes_ratio(self) -> None:
        """Remember how much smaller compacted output was than its small input files, for the next
        run's first estimate of the file count."""
        import json
        import statistics

        if not self._measured_ratios:
            return
        ratio = statistics.median(self._measured_ratios)
        self.storage.write_text(self.paths.sizing, json.dumps(
            {"bytes_ratio": round(ratio, 4), "measured_by": self.run_id, "partitions": len(self._measured_ratios)}))
