"""The check of an Iceberg dataset's maintenance (compaction/iceberg_verify.py) on the Iceberg runtime of this Spark line
(1.0.0 on Spark 3.3, which Glue 4.0 runs the hourly maintenance with; 1.7.1 on 3.5; 1.11.0 on 4.1), in a subprocess:
the runtime and the SQL extensions are static settings of a session of its own, the one subprocess it shares with
test_iceberg_lines.py (tests/spark/iceberg_shared.py, its "verify" part, where the script is).

A faulty commit right after Iceberg's rewrite (compaction/faults.py iceberg_commit: a column's values gone, rows
deleted, keys nulled), made through the same command a team runs, fails the run (exit 1) naming the check; the table
is rolled back to the snapshot before the fault, no snapshot is expired, and a streaming append committed after the
fault is kept (cherry-picked back). Then a clean maintenance passes, and values at the ends of their types' ranges
(years 1 and 9999, the Julian-Gregorian switch, 1899-12-31, decimal(38,10) at full precision) read back equal by Spark
and by pyiceberg (pyarrow) after the rewrite."""

from __future__ import annotations

import importlib.util
from datetime import date, datetime
from decimal import Decimal

from .iceberg_shared import iceberg_part
from .test_compaction_verify import EXPECTED_TEXT, EXTREME_AMOUNTS, EXTREME_DAYS, EXTREME_MOMENTS


def _rows(state: dict) -> list[tuple]:
    """A state's rows as read_back_as_text gives them (the decimal as text through JSON: compared as a Decimal)."""
    return [(i, day, moment, Decimal(amount)) for i, day, moment, amount in state["rows"]]


def test_a_faulty_commit_after_the_rewrite_fails_maintenance_rolled_back_and_extremes_survive(tmp_path_factory):
    found, lake = iceberg_part(tmp_path_factory, "verify")
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

    rows = sorted(local_catalog(lake).load_table("streamlake_local.extremes").scan().to_arrow().to_pylist(),
                  key=lambda r: r["id"])
    assert [r["day"] for r in rows[1:]] == [date.fromisoformat(d) for d in EXTREME_DAYS]
    assert [r["moment"].replace(tzinfo=None) for r in rows[1:]] == [datetime.fromisoformat(m) for m in EXTREME_MOMENTS]
    assert [r["amount"] for r in rows[1:]] == [Decimal(a) for a in EXTREME_AMOUNTS]
