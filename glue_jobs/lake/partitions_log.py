"""The partitions log: which hour partitions each committed micro-batch wrote. An interface between the
streaming job (writer) and compaction (reader), like the lake layout (docs/compaction.md "Partitions log").

    <lake>/_partitions/<source>/<stream id>-b<batch id, 10 digits>.json
    {"format": 1, "source": "clickstream", "stream_id": "1a2b3c4d", "batch_id": 17,
     "partitions": ["event_date=2026-11-02/event_hour=3", ...]}

- One object per (source, stream, batch): S3 has no append. The streaming job writes it after the batch's
  files are published and before its commit marker, so an entry never names a partition whose files have
  not landed. A replayed batch writes the same object again (same key): nothing is recorded twice.
- Compaction reads the entries there are (one listing of the whole log, whatever the lake's size), compacts
  the closed partitions they name, whatever their age, and only then removes each entry (or rewrites it
  with the partitions not closed yet). Removing is the cursor: a run killed before it re-reads the entries,
  and compacting a partition twice changes nothing but its files.
- Hidden (leading underscore): Spark and Athena never read it; it lives under the lake prefix, so both job
  roles reach it with their lake grants.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from glue_jobs.lake.storage import HadoopStorage

LOG_DIR = "_partitions"
FORMAT = 1
_PARTITION_RE = re.compile(r"^event_date=\d{4}-\d{2}-\d{2}/event_hour=\d{1,2}$")

log = logging.getLogger("glue_jobs.lake.partitions_log")


@dataclass(frozen=True)
class LogEntry:
    path: str
    partitions: tuple[str, ...]  # "event_date=YYYY-MM-DD/event_hour=H"
    record: dict  # the whole entry as read


def entry_path(lake_path: str, source: str, stream_id: str, batch_id: int) -> str:
    return f"{lake_path.rstrip('/')}/{LOG_DIR}/{source}/{stream_id}-b{batch_id:010d}.json"


def write_entry(storage: HadoopStorage, lake_path: str, *, source: str, stream_id: str, batch_id: int,
                partitions) -> str:
    """Record the partitions a batch published into (sorted, each once); returns the entry's path."""
    names = sorted(set(partitions))
    bad = [p for p in names if not _PARTITION_RE.match(p)]
    if bad:
        raise ValueError(f"not hour partitions of the lake: {bad}")
    path = entry_path(lake_path, source, stream_id, batch_id)
    record = {"format": FORMAT, "source": source, "stream_id": stream_id, "batch_id": batch_id, "partitions": names}
    storage.write_text(path, json.dumps(record, separators=(",", ":")))
    return path


def read_entries(storage: HadoopStorage, lake_path: str) -> list[LogEntry]:
    """Every entry of every source, in one glob (a listing of the log and one per source). An entry that is
    not whole JSON is being written (a local file system shows a file before it is closed; an S3 object
    appears whole): skipped this time."""
    entries = []
    for info in storage.list(f"{lake_path.rstrip('/')}/{LOG_DIR}/*/*.json", files_only=True):
        text = storage.read_text(info.path)
        try:
            record = json.loads(text)
            partitions = tuple(record["partitions"])
        except (ValueError, KeyError, TypeError):
            log.warning("partitions log entry %s is not whole (%d bytes); read next time", info.path, len(text))
            continue
        entries.append(LogEntry(info.path, partitions, record))
    return sorted(entries, key=lambda e: e.path)


def keep_only(storage: HadoopStorage, entry: LogEntry, remaining) -> None:
    """Remove what was compacted from an entry: delete it when nothing remains, else rewrite it."""
    remaining = sorted(set(remaining))
    if not remaining:
        storage.delete(entry.path)
    elif tuple(remaining) != entry.partitions:
        storage.write_text(entry.path, json.dumps({**entry.record, "partitions": remaining}, separators=(",", ":")))
