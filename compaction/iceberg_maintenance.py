"""Hourly maintenance of an Iceberg dataset's table, instead of file compaction (the Parquet lake's): Iceberg's own
Spark procedures (iceberg.apache.org "Spark Procedures"), each one Iceberg commit, so a run killed anywhere leaves
the table as its last commit left it and the next run starts over.

1. `rewrite_data_files`: the micro-batches' small files of each hour partition rewritten to the target size (the
   binpack strategy; a file group that a concurrent append changed fails alone, Iceberg retries or leaves it). Then
   the check (compaction/iceberg_verify.py): the rewrite, and any other commit since maintenance began but the
   streaming job's appends, must hold its parent snapshot's rows, keys and non-null values; one that does not is
   rolled back, nothing is expired, and the run fails (verify.CheckFailed).
2. `rewrite_manifests`: one manifest per batch becomes a few, so planning a query reads few manifests.
3. `expire_snapshots`: snapshots older than the retention go, keeping at least RETAIN_LAST; the data and manifest
   files only they referenced are deleted. The streaming job's replay check reads the batch tags of the snapshots
   that are left (glue_jobs/lake/iceberg_lake.py); a replay older than the retention is still written once, by its
   key-and-hour check.
4. `remove_orphan_files`: files under the table's location that no snapshot references and that are older than
   ORPHAN_MIN_AGE_HOURS (at least a day: a file younger may belong to a commit in flight, such as the streaming
   job's current batch), for instance the data files of a batch killed before its commit.

Appends of the streaming job and this maintenance commit to the same table concurrently: appends add files, the
rewrite replaces files, and Iceberg's optimistic commits keep both (tests/spark/test_iceberg_lake.py runs
maintenance between micro-batches).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from glue_jobs.lake.iceberg_lake import IcebergTarget
from glue_jobs.lake.lake_table import LakeTable

log = logging.getLogger("compaction.iceberg_maintenance")

MB = 1024 * 1024
RETAIN_LAST = 10
ORPHAN_MIN_AGE_HOURS = 24


@dataclass(frozen=True)
class MaintenanceSettings:
    target_file_mb: int
    snapshot_retention_hours: int
    orphan_min_age_hours: int = ORPHAN_MIN_AGE_HOURS

    def __post_init__(self) -> None:
        if self.target_file_mb < 1:
            raise ValueError(f"target_file_mb must be at least 1, got {self.target_file_mb}")
        if self.snapshot_retention_hours < 1:
            raise ValueError(f"snapshot_retention_hours must be at least 1, got {self.snapshot_retention_hours}")
        if self.orphan_min_age_hours < ORPHAN_MIN_AGE_HOURS:
            raise ValueError(f"orphan_min_age_hours must be at least {ORPHAN_MIN_AGE_HOURS} (a younger file may belong to "
                             f"a commit in flight), got {self.orphan_min_age_hours}")


@dataclass(frozen=True)
class MaintenanceResult:
    table: str
    data_files_rewritten: int
    data_files_added: int
    manifests_rewritten: int
    manifests_added: int
    data_files_expired: int
    manifest_lists_expired: int
    orphan_files_removed: int
    seconds: float

    def render(self) -> str:
        return " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(self).items())


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("TIMESTAMP '%Y-%m-%d %H:%M:%S.%f UTC'")


def maintain(spark, target: IcebergTarget, settings: MaintenanceSettings, *, now: datetime | None = None,
             lake_table: LakeTable | None = None, after_rewrite=None) -> MaintenanceResult:
    """Run the four procedures on `target`, in the module doc's order, checking the rewrite before anything is
    expired; returns what each did. `lake_table`: the dataset's (its key; default: the dataset named like the table).
    `now` (default: the clock) dates the snapshot retention; a later one expires as of then (the tests).
    `after_rewrite(spark)`: a test hook run right after the rewrite (compaction/faults.py iceberg_commit)."""
    from compaction.iceberg_verify import check_since, current_snapshot

    started = time.time()
    now = now or datetime.now(timezone.utc)
    call = f"CALL {target.catalog}.system"
    table = f"'{target.namespace}.{target.table}'"
    before = current_snapshot(spark, target)
    rewrite = spark.sql(f"{call}.rewrite_data_files(table => {table}, options => map("
                        f"'target-file-size-bytes', '{settings.target_file_mb * MB}', 'min-input-files', '2'))").first()
    if after_rewrite is not None:
        after_rewrite(spark)
    check_since(spark, target, lake_table or LakeTable.of(target.table), before)
    manifests = spark.sql(f"{call}.rewrite_manifests(table => {table})").first()
    expired = spark.sql(f"{call}.expire_snapshots(table => {table}, "
                        f"older_than => {_timestamp(now - timedelta(hours=settings.snapshot_retention_hours))}, "
                        f"retain_last => {RETAIN_LAST})").first()
    # The orphan cutoff from the clock, never from a later `now`: Iceberg refuses a cutoff under 24 hours ago ("may
    # corrupt the table if other operations are happening at the same time").
    wall = min(now, datetime.now(timezone.utc))
    orphans = spark.sql(f"{call}.remove_orphan_files(table => {table}, "
                        f"older_than => {_timestamp(wall - timedelta(hours=settings.orphan_min_age_hours))})").collect()
    result = MaintenanceResult(
        table=target.name,
        data_files_rewritten=int(rewrite["rewritten_data_files_count"]),
        data_files_added=int(rewrite["added_data_files_count"]),
        manifests_rewritten=int(manifests["rewritten_manifests_count"]),
        manifests_added=int(manifests["added_manifests_count"]),
        data_files_expired=int(expired["deleted_data_files_count"]),
        manifest_lists_expired=int(expired["deleted_manifest_lists_count"]),
        orphan_files_removed=len(orphans),
        seconds=time.time() - started,
    )
    log.info("maintenance %s", result.render())
    return result
