"""The compaction journal: one small JSON record per state change, so a killed run can be finished or
undone by the next one (DESIGN.md invariant 2).

Per run and partition, under <lake>/_compaction/journal/<run_id>/<partition>/:

    plan.json    written before anything else: the exact input files (name, size, modification time)
    staged.json  the commit point, written only after the staged files were counted and verified:
                 plan + the staged files and the name each gets in the partition + row counts

Recovery (see docs/compaction.md): staged.json present -> roll forward (publish what is not yet
published, delete the inputs still there); only plan.json -> roll back (delete staging; the inputs
were never touched and nothing was published). When a partition is finished its record goes to
_compaction/history/ and its journal directory is removed, so the journal only ever holds
unfinished work and recovery lists a handful of entries, not the lake's history.

Records are written to a temporary name and renamed, so a reader sees a whole record or none; an
unreadable record is treated as missing, which is safe for the same reason (each step starts only
after the previous record is complete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from compaction.layout import RUN_ID_RE, HourPartition, LakePaths
from glue_jobs.lake.storage import HadoopStorage

FORMAT_VERSION = 1
PLAN = "plan.json"
STAGED = "staged.json"


@dataclass(frozen=True)
class PendingRun:
    run_id: str
    partition: HourPartition
    plan: dict | None
    staged: dict | None


class Journal:
    def __init__(self, storage: HadoopStorage, paths: LakePaths) -> None:
        self.storage = storage
        self.paths = paths

    def write(self, run_id: str, partition: HourPartition, name: str, record: dict) -> None:
        target = f"{self.paths.journal(run_id, partition)}/{name}"
        self._write_atomically(target, record)

    def write_history(self, partition: HourPartition, record: dict) -> None:
        target = self.paths.history(partition)
        self.storage.delete(target)
        self._write_atomically(target, record)

    def read_history(self, partition: HourPartition) -> dict | None:
        return self._read(self.paths.history(partition))

    def _write_atomically(self, target: str, record: dict) -> None:
        temporary = f"{target}.tmp"
        # One line (`jq .` indents it): json's C encoder, which `indent` turns off, writes a record of 2,000 inputs
        # in 1.2 ms instead of 4.7, and three such records a partition (plan, staged, history).
        self.storage.write_text(temporary, json.dumps({"format": FORMAT_VERSION, **record}, sort_keys=True))
        self.storage.rename(temporary, target)

    def _read(self, path: str) -> dict | None:
        if not self.storage.exists(path):
            return None
        try:
            record = json.loads(self.storage.read_text(path))
        except (ValueError, UnicodeDecodeError):
            return None
        return record if isinstance(record, dict) else None

    def pending(self) -> list[PendingRun]:
        """Every unfinished (run, partition) left by earlier runs, oldest run first."""
        found = []
        for run_dir in self.storage.list(self.paths.journal_root, include_hidden=True):
            if not run_dir.is_dir or not RUN_ID_RE.match(run_dir.name):
                continue
            for date_dir in self.storage.list(run_dir.path):
                for hour_dir in self.storage.list(date_dir.path):
                    partition = HourPartition.from_dirs(date_dir.name, hour_dir.name)
                    if partition is None:
                        continue
                    base = self.paths.journal(run_dir.name, partition)
                    found.append(PendingRun(run_dir.name, partition, self._read(f"{base}/{PLAN}"),
                                            self._read(f"{base}/{STAGED}")))
        return sorted(found, key=lambda r: (r.run_id, r.partition))

    def forget(self, run_id: str, partition: HourPartition) -> None:
        """Remove a finished or undone (run, partition): staged.json first, so a crash in between leaves
        at most plan.json, whose roll-back only cleans up."""
        base = self.paths.journal(run_id, partition)
        for name in (STAGED, f"{STAGED}.tmp", PLAN, f"{PLAN}.tmp"):
            self.storage.delete(f"{base}/{name}")
        self.storage.delete(base, recursive=True)
        self._remove_if_empty(f"{self.paths.journal_root}/{run_id}/{partition.date_dir}")
        self._remove_if_empty(f"{self.paths.journal_root}/{run_id}")

    def _remove_if_empty(self, path: str) -> None:
        if self.storage.exists(path) and not self.storage.list(path, include_hidden=True):
            self.storage.delete(path, recursive=True)
