"""The exactly-once protocol of a micro-batch (DESIGN invariant 1): file operations only, no Spark plans.

Spark (and Glue's forEachBatch) replays a batch with the same id and the same offsets when it crashed
before its checkpoint commit. For batch b, `MicroBatchWriter` (glue_jobs/batch.py) calls, in this order:

1. `committed_stats(b)`: if the commit marker `<checkpoint>/_streamlake/batch-<b>.committed.json` exists,
   the batch was fully published before the crash: nothing is written again, the recorded counts are
   returned.
2. `discard_partial(b)`: any earlier partial output is removed: the files named in the publish manifest
   `batch-<b>.manifest.json` (written before the first file moved) and both staging directories.
3. Spark writes lake rows and dead letters into the staging directories (`lake_staging(b)`,
   `dead_letter_staging(b)`: `<lake>/_staging/<source>/batch=<b>/`, `<dead letters>/_staging/<source>/batch=<b>/`).
4. `publish(b)`: the manifest of final names is written, each staged file is moved to its final name,
   then the partitions-log entry naming the lake hours the batch wrote (glue_jobs/lake/partitions_log.py:
   after the files landed, so compaction never reads an entry whose files are not there).
5. `mark_committed(stats)`: the commit marker, then the manifest, an old marker and staging are deleted.

Final names: `<lake>/event_date=YYYY-MM-DD/event_hour=H/part-<source>-<stream>-b<batch:010d>-<n:04d>.snappy.parquet`
and `<dead letters>/ingest_date=YYYY-MM-DD/part-<source>-<stream>-b<batch:010d>-<n:04d>.snappy.parquet`,
where <stream> is the first 8 characters of the streaming query id in `<checkpoint>/metadata`: a new
checkpoint restarts batch ids at 0 without colliding with an earlier run's files.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field

from glue_jobs.lake import partitions_log
from glue_jobs.lake.storage import HadoopStorage

log = logging.getLogger("glue_jobs.commit")

STATE_DIR = "_streamlake"
STAGING_DIR = "_staging"
PARQUET_SUFFIX = ".snappy.parquet"
# Markers older than this many batches are deleted: only the last uncommitted batch is ever replayed.
MARKERS_KEPT = 100
# Files moved from staging at once: every move is a request on S3, a batch writes up to one file per core
# and partition.
PUBLISH_THREADS = 8
# Directory levels of partitions below each staging root: event_date/event_hour, ingest_date.
_LAKE_DEPTH, _DEAD_LETTER_DEPTH = 2, 1


@dataclass(frozen=True)
class BatchStats:
    """What a batch did; the commit marker holds it as JSON."""

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
    # For the metrics, not the counts (so two stats compare by what the batch did): the dataset, and the
    # processing time minus the newest event time the batch wrote (None when it wrote no row): freshness.
    dataset: str = field(default="", compare=False)
    newest_event_age_seconds: float | None = field(default=None, compare=False)
    # The processing time minus the earliest arrival time in the batch (None for an empty batch): how long the
    # oldest record waited in the source, what Glue's maxConsumerLagInMs measures for its own readers.
    arrival_lag_ms: int | None = field(default=None, compare=False)
    # Anomalies of the source frame the adapter worked around (glue_jobs/sources.from_kinesis notes): unexpected
    # columns, a missing or odd record timestamp. Published as FrameAnomalies.
    frame_anomalies: int = field(default=0, compare=False)
    # Valid records holding fields the schema does not know, stored in _unknown_fields or dropped (dataset.json
    # unknown_fields keep/drop). Published as UnknownFields.
    unknown_fields: int = 0
    # Records whose payload holds U+FFFD where the source decoded the bytes before the job (Kinesis: Glue hands over
    # text, so a byte that was not UTF-8 may arrive as U+FFFD, unverified; a producer may also send one). Published as
    # ReplacementCharacters.
    replacement_characters: int = field(default=0, compare=False)
    # Of duplicates_collapsed, the copies whose content differed from the copy kept (within the batch, or an Iceberg
    # append's keys the table held for the hour already; glue_jobs/lake/dropped_copies.py). Published as DifferingDuplicates.
    differing_duplicates: int = 0

    @property
    def reconciles(self) -> bool:
        return self.records_in == self.records_written + self.dead_letters + self.duplicates_collapsed

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchStats:
        return cls(**json.loads(text))


def read_stream_id(storage: HadoopStorage, checkpoint_path: str) -> str:
    """First 8 characters of the streaming query id Spark keeps in `<checkpoint>/metadata`."""
    text = storage.read_text(f"{checkpoint_path.rstrip('/')}/metadata")
    return json.loads(text.splitlines()[0])["id"].replace("-", "")[:8]


class BatchCommit:
    """The protocol's steps for one source's query (see the module doc)."""

    def __init__(self, storage: HadoopStorage, *, source_name: str, lake_path: str | None, dead_letter_path: str,
                 checkpoint_path: str, stream_id: str | None = None, query_checkpoint: str | None = None) -> None:
        """`lake_path` None: the batch writes dead letters only (a routed source's unroutable records:
        glue_jobs/routed_batch.py). `query_checkpoint`: the Spark checkpoint whose `metadata` holds the query id, when
        `checkpoint_path` is a folder inside it (each dataset of a routed source keeps its markers in one); default
        `checkpoint_path`."""
        self.storage = storage
        self.source_name = source_name
        self.lake_path = lake_path.rstrip("/") if lake_path is not None else None
        self.dead_letter_path = dead_letter_path.rstrip("/")
        self.checkpoint_path = checkpoint_path.rstrip("/")
        self.state_path = f"{self.checkpoint_path}/{STATE_DIR}"
        self.query_checkpoint = (query_checkpoint or checkpoint_path).rstrip("/")
        self._stream_id = stream_id

    @property
    def stream_id(self) -> str:
        if self._stream_id is None:
            self._stream_id = read_stream_id(self.storage, self.query_checkpoint)
        return self._stream_id

    def marker(self, batch_id: int, kind: str) -> str:
        return f"{self.state_path}/batch-{batch_id:010d}.{kind}.json"

    def lake_staging(self, batch_id: int) -> str:
        if self.lake_path is None:
            raise ValueError(f"source {self.source_name}: this commit writes dead letters only, it has no lake")
        return f"{self.lake_path}/{STAGING_DIR}/{self.source_name}/batch={batch_id}"

    def dead_letter_staging(self, batch_id: int) -> str:
        # The source in the path, as in the lake's: sources sharing a root never stage into each other's batch.
        return f"{self.dead_letter_path}/{STAGING_DIR}/{self.source_name}/batch={batch_id}"

    def committed_stats(self, batch_id: int) -> BatchStats | None:
        """The recorded counts of a committed batch, or None. A marker that is not whole JSON was cut off while
        being written (a local file system shows a file before it is closed; an S3 object appears whole on
        close): the batch did not commit, and its publish manifest, deleted only after the marker, lets the
        replay remove what it had published."""
        marker = self.marker(batch_id, "committed")
        if not self.storage.exists(marker):
            return None
        text = self.storage.read_text(marker)
        try:
            return BatchStats.from_json(text)
        except (ValueError, TypeError):
            log.warning("commit marker %s is incomplete (%d bytes); the batch is redone", marker, len(text))
            return None

    def discard_partial(self, batch_id: int) -> None:
        """Remove what an interrupted attempt of this batch published (its manifest's files) and staged."""
        manifest = self.marker(batch_id, "manifest")
        if self.storage.exists(manifest):
            moves = json.loads(self.storage.read_text(manifest))["files"]
            removed = sum(1 for move in moves if self.storage.delete(move["final"]))
            log.warning("batch %s: removed %s file(s) of an interrupted publish", batch_id, removed)
            self.storage.delete(manifest)
        self._delete_staging(batch_id)

    def publish(self, batch_id: int) -> list[str]:
        """Move the staged files to their final names, then record the lake hours they went to in the
        partitions log; returns the final names."""
        moves, partitions = [], set()
        roots = ([(self.lake_path, self.lake_staging(batch_id), _LAKE_DEPTH)] if self.lake_path is not None else []) + [
            (self.dead_letter_path, self.dead_letter_staging(batch_id), _DEAD_LETTER_DEPTH)]
        for root, staging, depth in roots:
            per_partition: dict[str, int] = {}
            for partition, path in self._staged_files(staging, depth):
                n = per_partition[partition] = per_partition.get(partition, -1) + 1
                name = f"part-{self.source_name}-{self.stream_id}-b{batch_id:010d}-{n:04d}{PARQUET_SUFFIX}"
                moves.append({"staged": path, "final": f"{root}/{partition}/{name}"})
                if root == self.lake_path:
                    partitions.add(partition)
        # The manifest is written before the first move, so a crash mid-publish is undone on replay.
        self.storage.write_text(self.marker(batch_id, "manifest"), json.dumps({"files": moves}, indent=1))
        self.storage.rename_files(((move["staged"], move["final"]) for move in moves), threads=PUBLISH_THREADS)
        if partitions:
            # A replay of this batch writes the same entry again (glue_jobs/lake/partitions_log.py).
            partitions_log.write_entry(self.storage, self.lake_path, source=self.source_name, stream_id=self.stream_id,
                                       batch_id=batch_id, partitions=partitions)
        return [move["final"] for move in moves]

    def mark_committed(self, stats: BatchStats) -> None:
        """Write the commit marker (the batch is done), then clean up what only a replay would have needed."""
        self.storage.write_text(self.marker(stats.batch_id, "committed"), stats.to_json())
        self.storage.delete(self.marker(stats.batch_id, "manifest"))
        self.storage.delete(self.marker(stats.batch_id - MARKERS_KEPT, "committed"))
        self._delete_staging(stats.batch_id)

    def _delete_staging(self, batch_id: int) -> None:
        if self.lake_path is not None:
            self.storage.delete(self.lake_staging(batch_id), recursive=True)
        self.storage.delete(self.dead_letter_staging(batch_id), recursive=True)

    def _staged_files(self, root: str, depth: int) -> list[tuple[str, str]]:
        """(partition sub-path such as `event_date=.../event_hour=...`, file path) of the visible Parquet files
        `depth` directory levels below root, in one listing (a glob) rather than one per partition directory."""
        return [("/".join(info.path.rstrip("/").split("/")[-depth - 1:-1]), info.path)
                for info in self.storage.list(root + "/*" * depth + "/*.parquet", files_only=True)]
