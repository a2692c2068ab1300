"""The compaction run: recover unfinished work, find the hours that need compaction, compact each one.

Per partition (docs/compaction.md has the why of each step and what recovery does after a kill):

    list inputs -> plan.json -> read exactly those files -> drop duplicate keys -> write staging
    -> check the staged files hold every input row but the copies dropped (compaction/verify.py)
    -> staged.json (commit point) -> publish outputs
    into the partition -> delete the inputs -> history record -> remove journal and staging

Nothing is ever written to a path that is being read: inputs are read from the partition, outputs
are written to staging (compaction/staging.py) and only moved into the partition, under names no input
can have. Which partitions a run looks at is compaction/discovery.py; what it reports, compaction/results.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone

from compaction import layout
from compaction.discovery import (
    check_hour_closed,
    compaction_reason,
    data_files,
    find_partitions,
    last_closed_hour,
    logged_partitions,
)
from compaction.faults import FaultInjector
from compaction.journal import PLAN, STAGED, Journal
from compaction.layout import HourPartition, LakePaths
from compaction.metrics import LogMetricSink, MetricSink
from compaction.results import CompactionError, PartitionResult, RunSummary
from compaction.settings import MB, CompactionSettings
from compaction.staging import Stager
from glue_jobs.commit.ownership import claim
from glue_jobs.lake import partitions_log
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.storage import FileInfo, HadoopStorage

# What the entry points and tests import from here; the settings and the hour checks live in
# compaction/settings.py and compaction/discovery.py.
__all__ = ["MB", "CompactionSettings", "Compactor", "check_hour_closed", "last_closed_hour"]

log = logging.getLogger("compaction")


class Compactor:
    def __init__(
        self,
        spark,
        settings: CompactionSettings,
        *,
        sink: MetricSink | None = None,
        faults: FaultInjector | None = None,
        now: datetime | None = None,
        on_result: Callable[[PartitionResult], None] | None = None,
    ) -> None:
        """`on_result`: called with each partition's result as it ends (compact-local prints it), recovered ones first."""
        self.spark = spark
        self.settings = settings
        self.storage = HadoopStorage(spark)
        self.paths = LakePaths(self.storage.qualify(settings.lake_path.rstrip("/")))
        # A lake of another dataset is refused before anything is read or deleted (glue_jobs/commit/ownership.py); one no job has
        # written yet is left as it is.
        claim(self.storage, self.paths.root, "lake", {"dataset": LakeTable.of(settings.dataset).dataset.name}, create=False)
        self.journal = Journal(self.storage, self.paths)
        self.sink = sink if sink is not None else LogMetricSink(settings.environment)
        self.faults = faults if faults is not None else FaultInjector()
        self.now = now or datetime.now(timezone.utc)
        self.on_result = on_result
        check_hour_closed(settings, self.now)
        self.run_id = layout.new_run_id(self.now)
        self.stager = Stager(spark, self.storage, self.paths, run_id=self.run_id,
                             target_file_bytes=settings.target_file_bytes, faults=self.faults,
                             table=LakeTable.of(settings.dataset))

    def run(self) -> RunSummary:
        started = time.monotonic()
        summary = RunSummary(run_id=self.run_id, dataset=self.stager.table.name)
        try:
            for recovered in self.recover():
                summary.results.append(recovered)
                self._tell(recovered)
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
                self._tell(result)
                if result.action != "failed":
                    done.add(partition.key)
            self.stager.save_bytes_ratio()
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

    def _tell(self, result: PartitionResult) -> None:
        if self.on_result is not None:
            self.on_result(result)

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

            staged = self.stager.stage(partition, inputs)
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
            differing_duplicates=record.get("differing_duplicates", 0),
            restaged=record.get("restaged", False), inputs_left=len(changed),
        )
