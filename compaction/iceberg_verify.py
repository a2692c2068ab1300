"""The check of an Iceberg dataset's maintenance (compaction/iceberg_maintenance.py) before anything is expired: every
commit maintenance made since it started must leave the rows as they were: row count, keys, non-null values of every
column (compaction/verify.py's Account), each commit against its parent snapshot. Maintenance's commits are the
`replace` snapshots (Iceberg's `rewrite_data_files`) and any carrying MAINTENANCE_PROPERTY (in the tests, a faulty
commit standing in for a buggy rewrite: compaction/faults.py); an append, or a delete someone else runs meanwhile,
is not maintenance's and is left alone.

Each commit is read at its own snapshot and at its parent's with SQL time travel, `VERSION AS OF <snapshot id>` ("Spark
Queries", https://iceberg.apache.org/docs/1.0.0/spark-queries/#time-travel: Spark 3.3 and later; the read option
`snapshot-id` is refused by Iceberg 1.11 on Spark 4.1, "use Spark built-in versionAsOf"; tested on 1.0.0, 1.7.1 and
1.11.0 by tests/spark/test_iceberg_verify.py), limited to the hours of event time whose files the commit added or removed (the `entries` metadata table of the
current snapshot, whose manifests hold the commit's ADDED and DELETED entries until the manifests are rewritten, the
step after this check; the whole table when it names none), so the cost follows what was rewritten, not the table.

A commit that fails is undone before the run fails: `rollback_to_snapshot` to its parent, then `cherrypick_snapshot`
of every append the rollback took out of the current state (appends commit concurrently; a rolled-back streaming
append's batch tag would otherwise stay in the snapshot list, and its replay would be skipped as committed). A delete
or overwrite someone else committed after the failed commit cannot be cherry-picked: the log names it. Both are
Iceberg's Spark procedures ("Spark Procedures", https://iceberg.apache.org/docs/1.0.0/spark-procedures/: rollback_to_
snapshot(table, snapshot_id), cherrypick_snapshot(table, snapshot_id); an append can be cherry-picked). No snapshot is
expired before this check passes, so the rolled-back commit's inputs are the parent's files, in place.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

from compaction import verify
from glue_jobs.lake.iceberg_lake import BATCH_PROPERTY, IcebergTarget
from glue_jobs.lake.lake_table import LakeTable

log = logging.getLogger("compaction.iceberg_maintenance")

# Iceberg's snapshot summary property naming the snapshot a cherry-pick applied (SnapshotSummary.SOURCE_SNAPSHOT_ID_PROP,
# apache/iceberg core/src/main/java/org/apache/iceberg/SnapshotSummary.java).
SOURCE_SNAPSHOT = "source-snapshot-id"
# A snapshot summary property marking a commit as maintenance's, besides Iceberg's rewrite (`replace`).
MAINTENANCE_PROPERTY = "streamlake.maintenance"
_HOUR = timedelta(hours=1)


def current_snapshot(spark, target: IcebergTarget) -> int | None:
    """The table's current snapshot id (None for a table without one): the newest current ancestor in `history`."""
    rows = spark.sql(f"SELECT snapshot_id FROM {target.name}.history WHERE is_current_ancestor "
                     "ORDER BY made_current_at DESC LIMIT 1").collect()
    return int(rows[0][0]) if rows else None


def _snapshots(spark, target: IcebergTarget) -> dict[int, dict]:
    rows = spark.sql(f"SELECT snapshot_id, parent_id, committed_at, operation, summary FROM {target.name}.snapshots").collect()
    return {int(r.snapshot_id): {"parent": r.parent_id, "at": r.committed_at, "operation": r.operation,
                                 "summary": dict(r.summary or {})} for r in rows}


def _ancestry(snapshots: dict[int, dict], current: int | None, stop: int | None) -> list[int]:
    """The current snapshot's ancestors after `stop` (exclusive), oldest first."""
    chain = []
    while current is not None and current != stop and current in snapshots:
        chain.append(current)
        current = snapshots[current]["parent"]
    return chain[::-1]


def check_since(spark, target: IcebergTarget, table: LakeTable, before: int | None) -> None:
    """Check every commit of maintenance's after snapshot `before`; undo the first that fails and raise
    verify.CheckFailed naming the check."""
    snapshots = _snapshots(spark, target)
    for snapshot in _ancestry(snapshots, current_snapshot(spark, target), before):
        info = snapshots[snapshot]
        ours = info["operation"] == "replace" or MAINTENANCE_PROPERTY in info["summary"]
        if not ours or info["parent"] is None:
            continue  # another writer's commit (the streaming job's appends), or a first commit: nothing to compare
        parent = int(info["parent"])
        where = _touched_hours(spark, target, table, snapshot)
        columns, before_rows = _account(spark, target, table, parent, where)
        columns_after, after_rows = _account(spark, target, table, snapshot, where)
        problems = verify.differences(before_rows, after_rows, columns=list(dict.fromkeys(columns + columns_after)))
        if problems:
            undo(spark, target, parent)
            raise verify.CheckFailed(
                f"maintenance check failed for {target.name}: {info['operation']} snapshot {snapshot} against its parent "
                f"{parent}: {'; '.join(problems)}; rolled back to snapshot {parent}, nothing was expired")
        log.info("%s: %s snapshot %s holds its parent's rows (%d)", target.name, info["operation"], snapshot, after_rows.rows)


def _account(spark, target: IcebergTarget, table: LakeTable, snapshot: int, where) -> tuple[list[str], verify.Account]:
    frame = spark.sql(f"SELECT * FROM {target.name} VERSION AS OF {int(snapshot)}")
    if where is not None:
        frame = frame.where(where)
    columns = list(frame.columns)
    return columns, verify.account(frame.agg(*verify.aggregates(table, columns)).first().asDict(), columns)


def _touched_hours(spark, target: IcebergTarget, table: LakeTable, snapshot: int):
    """A filter on the event time to the hours whose files `snapshot` added or removed (the table is partitioned by
    hours(<event time>): glue_jobs/lake/iceberg_lake.py), or None (the whole table) when the entries do not say."""
    from pyspark.sql import functions as F

    partitions = spark.sql(f"SELECT DISTINCT data_file.partition AS p FROM {target.name}.entries "
                           f"WHERE snapshot_id = {int(snapshot)}").collect()
    hours = set()
    for row in partitions:
        values = list(row.p.asDict().values()) if row.p is not None else []
        if len(values) != 1 or not isinstance(values[0], int):
            return None  # another partitioning than hours(<event time>): the whole table
        hours.add(values[0])
    if not hours:
        return None
    event_time, start = F.col(f"`{table.event_time}`"), datetime(1970, 1, 1, tzinfo=timezone.utc)
    ranges = None
    for hour in sorted(hours):
        low = start + hour * _HOUR
        this = (event_time >= F.lit(low)) & (event_time < F.lit(low + _HOUR))
        ranges = this if ranges is None else ranges | this
    return ranges


def undo(spark, target: IcebergTarget, parent: int) -> None:
    """The table back at snapshot `parent` (an ancestor of the current one), keeping the appends committed since (the
    streaming job's): rolled back, then each append the rollback left out cherry-picked onto it, oldest first."""
    call, name = f"CALL {target.catalog}.system", f"'{target.namespace}.{target.table}'"
    spark.sql(f"{call}.rollback_to_snapshot(table => {name}, snapshot_id => {int(parent)})").collect()
    snapshots = _snapshots(spark, target)
    ancestors = set(_ancestry(snapshots, current_snapshot(spark, target), None))
    picked = {int(s["summary"][SOURCE_SNAPSHOT]) for a, s in snapshots.items() if a in ancestors and SOURCE_SNAPSHOT in s["summary"]}
    since = snapshots[int(parent)]["at"]
    lost = sorted((s["at"], snapshot) for snapshot, s in snapshots.items()
                  if s["at"] > since and snapshot not in ancestors and snapshot not in picked)
    for _, snapshot in lost:
        info = snapshots[snapshot]
        if info["operation"] == "append":
            spark.sql(f"{call}.cherrypick_snapshot(table => {name}, snapshot_id => {snapshot})").collect()
            log.warning("%s: append %s (%s) re-applied after the rollback", target.name, snapshot,
                        info["summary"].get(BATCH_PROPERTY, "not the streaming job's"))
        elif info["operation"] != "replace" and MAINTENANCE_PROPERTY not in info["summary"]:
            log.error("%s: the rollback took out %s snapshot %s, someone else's commit: it cannot be cherry-picked, "
                      "commit it again", target.name, info["operation"], snapshot)
