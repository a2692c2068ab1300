"""The hourly maintenance of an Iceberg dataset (compaction/iceberg_maintenance.py) after many micro-batches and
between them, through the same command a team runs (`python -m compaction run-local --dataset <iceberg dataset>`),
counted by pyiceberg: live data files, snapshots, manifests; orphan files older than a day removed, younger kept;
snapshots past the retention expired down to the last ten; every valid record once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compaction.iceberg_maintenance import MaintenanceSettings

from .iceberg_support import (
    DATASET,
    REPO,
    _data_files,
    _env,
    _generate,
    _pyiceberg_table,
    _runner,
    _tags,
)


def test_settings_refuse_an_orphan_age_under_a_day_and_empty_retention():
    with pytest.raises(ValueError, match="at least 24"):
        MaintenanceSettings(target_file_mb=128, snapshot_retention_hours=168, orphan_min_age_hours=2)
    with pytest.raises(ValueError, match="snapshot_retention_hours"):
        MaintenanceSettings(target_file_mb=128, snapshot_retention_hours=0)


def _counts(tmp_path: Path) -> dict[str, int]:
    table = _pyiceberg_table(tmp_path)
    return {"data_files": len(list(table.scan().plan_files())), "snapshots": len(table.snapshots()),
            "manifests": len(table.inspect.manifests()), "rows": table.scan().to_arrow().num_rows}


def _run(command: list[str], datasets: Path, **env: str) -> str:
    done = subprocess.run(command, env=_env(datasets, **env), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _maintain(tmp_path: Path, datasets: Path, *extra: str) -> str:
    return _run([sys.executable, "-m", "compaction", "run-local", "--dataset", DATASET, "--lake", str(tmp_path / "lake"),
                 "--target-file-mb", "64", *extra], datasets)


@pytest.mark.e2e
def test_maintenance_between_micro_batches_then_after_them_bounds_files_snapshots_and_manifests(tmp_path, iceberg_orders):
    expect = _generate(iceberg_orders, tmp_path / "all", records=2400, files=12, seed=31)
    (tmp_path / "in").mkdir()
    files = sorted((tmp_path / "all").glob("*.json"))
    for path in files[:6]:
        shutil.copy(path, tmp_path / "in")
    _run(_runner(tmp_path, "--once"), iceberg_orders)  # 6 micro-batches, one file each
    before = _counts(tmp_path)
    assert before["snapshots"] == 6 and before["manifests"] == 6

    out = _maintain(tmp_path, iceberg_orders)
    first = _counts(tmp_path)
    assert "maintained table=lake.streamlake_local.orders" in out
    assert first["rows"] == before["rows"] and first["data_files"] < before["data_files"]
    assert first["manifests"] <= 2  # one per batch became one (the rewrite's own may add one)

    # The stream goes on after maintenance committed: 6 more micro-batches on the rewritten table.
    for path in files[6:]:
        shutil.copy(path, tmp_path / "in")
    _run(_runner(tmp_path, "--once"), iceberg_orders)
    keys = _pyiceberg_table(tmp_path).scan().to_arrow().column("order_id").to_pylist()
    assert len(keys) == len(set(keys)) and sorted(keys) == sorted(expect["valid_keys"])
    tags = [t for t in _tags(_pyiceberg_table(tmp_path)) if t]
    assert len(tags) == len(set(tags)) == 12

    # An orphan two days old (a batch's files left by a kill before its commit) and one written a minute ago.
    (live,) = list(_data_files(tmp_path))[:1]
    old_orphan = live.with_name("00000-orphan-old.parquet")
    young_orphan = live.with_name("00000-orphan-young.parquet")
    shutil.copy(live, old_orphan)
    shutil.copy(live, young_orphan)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_orphan, (two_days_ago, two_days_ago))
    after_stream = _counts(tmp_path)
    out = _maintain(tmp_path, iceberg_orders, "--snapshot-retention-hours", "1")
    final = _counts(tmp_path)
    assert "orphan_files_removed=1" in out and not old_orphan.exists() and young_orphan.exists()
    assert final["rows"] == len(expect["valid_keys"]) and final["data_files"] < after_stream["data_files"]
    assert final["manifests"] <= 2
    # Snapshots are all younger than an hour: retention keeps them.
    assert final["snapshots"] >= after_stream["snapshots"] > 10

    # The same maintenance as of eight days later (its `now`): every snapshot is past the 7-day retention, the last
    # ten are kept, and the table still reads every row.
    script = (
        "from datetime import datetime, timedelta, timezone\n"
        "from compaction.iceberg_maintenance import MaintenanceSettings, maintain\n"
        "from glue_jobs.local_runner import local_iceberg_target, local_spark_session\n"
        f"spark = local_spark_session(iceberg_warehouse={str(tmp_path / 'lake')!r})\n"
        f"result = maintain(spark, local_iceberg_target({DATASET!r}), MaintenanceSettings(64, 168),"
        " now=datetime.now(timezone.utc) + timedelta(days=8))\n"
        "print(result.render())\n")
    out = _run([sys.executable, "-c", script], iceberg_orders)
    expired = _counts(tmp_path)
    assert expired["snapshots"] == 10 and expired["rows"] == len(expect["valid_keys"])
    assert "manifest_lists_expired=" in out and "manifest_lists_expired=0 " not in out
    print(f"counts: before {before}, after first maintenance {first}, after the stream {after_stream}, final {final}, "
          f"eight days later {expired}")
