"""Which partitions a run looks at, and whether each needs compacting (docs/compaction.md "Which partitions
are compacted"): only closed hours, named by the partitions log or found by scanning the lookback window."""

from __future__ import annotations

from datetime import datetime, timedelta

from compaction import layout
from compaction.layout import HourPartition, LakePaths
from compaction.settings import CompactionSettings
from glue_jobs.lake import partitions_log
from glue_jobs.lake.storage import FileInfo, HadoopStorage

# A lone file at least this share of the target is left alone (rewriting it gains nothing).
NEAR_TARGET_SHARE = 0.75


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
    return [f for f in storage.list(path, files_only=True) if layout.is_data_file(f.name)]


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
