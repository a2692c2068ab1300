"""The hourly maintenance of an Iceberg dataset's settings (compaction/iceberg_maintenance.py). The maintenance itself,
between micro-batches and after them, runs in tests/spark/test_iceberg_lake.py on the local run's own table."""

from __future__ import annotations

import pytest

from compaction.iceberg_maintenance import MaintenanceSettings


def test_settings_refuse_an_orphan_age_under_a_day_and_empty_retention():
    with pytest.raises(ValueError, match="at least 24"):
        MaintenanceSettings(target_file_mb=128, snapshot_retention_hours=168, orphan_min_age_hours=2)
    with pytest.raises(ValueError, match="snapshot_retention_hours"):
        MaintenanceSettings(target_file_mb=128, snapshot_retention_hours=0)
