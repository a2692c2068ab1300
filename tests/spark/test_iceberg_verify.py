"""The check of an Iceberg dataset's maintenance (compaction/iceberg_verify.py) on the Iceberg runtime of this Spark line
(1.0.0 on Spark 3.3, which Glue 4.0 runs the hourly maintenance with; 1.7.1 on 3.5; 1.11.0 on 4.1), in a subprocess:
the runtime and the SQL extensions are static settings of a session of its own.

A faulty commit right after Iceberg's rewrite (compaction/faults.py iceberg_commit: a column's values gone, rows
deleted, keys nulled), made through the same command a team runs, fails the run (exit 1) naming the check; the table
is rolled back to the snapshot before the fault, no snapshot is expired, and a streaming append committed after the
fault is kept (cherry-picked back). Then a clean maintenance passes, and values at the ends of their types' ranges
(years 1 and 9999, the Julian-Gregorian switch, 1899-12-31, decimal(38,10) at full precision) read back equal by Spark
and by pyiceberg (pyarrow) after the rewrite."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from .test_compaction_verify import EXPECTED_TEXT, EXTREME_AMOUNTS, EXTREME_DAYS, EXTREME_MOMENTS, extremes_dataset

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r'''
import io, json, os, sys
from contextlib import redirect_stdout
from pyspark.sql import functions as F
from compaction import __main__ as cli
from compaction.faults import BUG_ENV, iceberg_commit
from compaction.iceberg_maintenance import MaintenanceSettings, maintain
from compaction.iceberg_verify import current_snapshot
from compaction.verify import CheckFailed
from glue_jobs.lake.iceberg_lake import BATCH_PROPERTY, ensure_table
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.local_runner import local_iceberg_target
from glue_jobs.session import local_session
from tests.spark.test_compaction_verify import extreme_rows_sql, read_back_as_text

lake = sys.argv[1]
spark = local_session("iceberg-verify", master="local[1]", iceberg_warehouse=lake)
table, target = LakeTable.of("extremes"), local_iceberg_target("extremes")
ensure_table(spark, table, target)
extremes = spark.sql(extreme_rows_sql("2026-11-20 09:00:00"))
columns = [name for name, _ in table.data_columns()]

def append(frame, tag):
    frame = frame.select(*columns, F.to_date("at").alias("event_date"), F.hour("at").alias("event_hour"))
    frame.writeTo(target.name).option(f"snapshot-property.{BATCH_PROPERTY}", tag).append()

for n, ids in enumerate([("x0", "x1"), ("x2", "x3"), ("x4",)]):  # three small files in one hour: the rewrite's work
    append(extremes.where(F.col("id").isin(*ids)), f"extremes:s:{n}")

def state():
    return {"rows": [list(map(str, r)) for r in read_back_as_text(spark.table(target.name))],
            "snapshot": current_snapshot(spark, target), "snapshots": spark.table(f"{target.name}.snapshots").count()}

def cli_run(bug):
    os.environ[BUG_ENV] = bug
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["run-local", "--dataset", "extremes", "--lake", lake, "--target-file-mb", "64"])
    os.environ.pop(BUG_ENV)
    return code, out.getvalue()

found = {"initial": state(), "bugs": {}}
for bug in ("drop_column", "null_key"):
    before = state()
    code, printed = cli_run(bug)
    found["bugs"][bug] = {"code": code, "printed": printed, "before": before, "after": state()}

# drop_rows through the API, with a streaming append committed after the faulty commit: the rollback keeps it
late = spark.sql("SELECT 'late-1' AS id, TIMESTAMP '2026-11-20 09:30:00' AS at, DATE '2026-11-20' AS day, "
                 "TIMESTAMP '2026-11-20 09:30:00' AS moment, CAST(1.5 AS DECIMAL(38,10)) AS amount, 'test' AS source, "
                 "'0' AS source_partition, '9' AS source_offset, TIMESTAMP '2026-11-20 09:30:00' AS arrival_time, "
                 "CAST(9 AS BIGINT) AS batch_id")
def faulty_then_appended(session):
    iceberg_commit("drop_rows", session, target, table)
    append(late, "extremes:s:9")
before = state()
try:
    maintain(spark, target, MaintenanceSettings(64, 168), lake_table=table, after_rewrite=faulty_then_appended)
    error = None
except CheckFailed as failed:
    error = str(failed)
found["bugs"]["drop_rows"] = {"error": error, "before": before, "after": state()}

code, printed = cli_run("")
found["clean"] = {"code": code, "printed": printed, "after": state()}
print(json.dumps(found))
'''


def _run(tmp_path: Path) -> dict:
    datasets = extremes_dataset(tmp_path / "datasets", table_format="iceberg")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_DATASETS": str(datasets)}
    env.pop("COMPACTION_BUG", None)
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "lake")], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rows(state: dict) -> list[tuple]:
    """A state's rows as read_back_as_text gives them (the decimal as text through JSON: compared as a Decimal)."""
    return [(i, day, moment, Decimal(amount)) for i, day, moment, amount in state["rows"]]


def test_a_faulty_commit_after_the_rewrite_fails_maintenance_rolled_back_and_extremes_survive(tmp_path):
    found = _run(tmp_path)
    expected = EXPECTED_TEXT
    assert _rows(found["initial"]) == expected

    checks = {"drop_column": "column `day` non-null count 0 in the output, 5 expected",
              "null_key": "rows without a key"}
    for bug, words in checks.items():
        run = found["bugs"][bug]
        assert run["code"] == 1, run["printed"]
        assert run["printed"].startswith("FAILED: maintenance check failed for lake.streamlake_local.extremes: "), run["printed"]
        assert words in run["printed"] and "rolled back to snapshot" in run["printed"]
        assert _rows(run["after"]) == expected  # the rows as before the fault
        assert run["after"]["snapshots"] >= run["before"]["snapshots"] + 1  # nothing expired; the fault's kept, not current
    assert "the set of keys differs" in found["bugs"]["null_key"]["printed"]

    dropped = found["bugs"]["drop_rows"]
    assert dropped["error"].startswith("maintenance check failed for lake.streamlake_local.extremes: "), dropped["error"]
    assert "row count" in dropped["error"] and "the set of keys differs" in dropped["error"]
    late = ("late-1", "2026-11-20", "2026-11-20 09:30:00.000000", Decimal("1.5"))
    assert _rows(dropped["after"]) == sorted(expected + [late])  # every row back, and the append made after the fault

    clean = found["clean"]
    assert clean["code"] == 0 and clean["printed"].startswith("maintained table=lake.streamlake_local.extremes"), clean["printed"]
    assert _rows(clean["after"]) == sorted(expected + [late])
    if importlib.util.find_spec("pyiceberg") is None:
        return  # the Spark lines' own venvs: Spark's read above is the check there
    from devtools.iceberg_demo import local_catalog

    rows = sorted(local_catalog(tmp_path / "lake").load_table("streamlake_local.extremes").scan().to_arrow().to_pylist(),
                  key=lambda r: r["id"])
    assert [r["day"] for r in rows[1:]] == [date.fromisoformat(d) for d in EXTREME_DAYS]
    assert [r["moment"].replace(tzinfo=None) for r in rows[1:]] == [datetime.fromisoformat(m) for m in EXTREME_MOMENTS]
    assert [r["amount"] for r in rows[1:]] == [Decimal(a) for a in EXTREME_AMOUNTS]
