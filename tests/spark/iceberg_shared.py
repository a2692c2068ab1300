"""One Iceberg subprocess for test_iceberg_lines.py and test_iceberg_verify.py: the Iceberg runtime and the SQL
extensions are static settings of a session of its own, so each of them used to start a JVM of its own (a minute or
more per Spark line). Here one script, in one local session, does both tests' work, each in a part of its own, and
prints each part's findings as JSON; the first test that asks runs it, once per pytest run, and each test asserts on
its part.

The parts share the session and its catalog's warehouse (`<run>/lake`), not a table: the lines part writes
`lake.line.orders`, the verify part `lake.streamlake_local.extremes` (Iceberg's maintenance, snapshot expiry and
orphan removal included, works on that one table). The datasets folder (STREAMLAKE_DATASETS) holds the verify part's
`extremes` dataset and a copy of the repository's `orders`, the dataset the lines part writes. A part that raises
does not stop the other: its traceback is its finding, and its test fails with it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .test_compaction_verify import extremes_dataset

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 900  # the two scripts' own timeouts were 300 s and 600 s

# The Iceberg lake step on this Spark line (test_iceberg_lines.py's docstring says what it settles).
_LINES_PART = r'''
def lines_part():
    from datetime import datetime, timezone
    from pyspark.sql import functions as F
    from glue_jobs.session import LOCAL_ICEBERG_CATALOG
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.lake.iceberg_lake import IcebergTarget, append_batch, committed_rows, differing_from_table, ensure_table

    table = LakeTable.of("orders")
    target = IcebergTarget(LOCAL_ICEBERG_CATALOG, "line", "orders")
    ensure_table(spark, table, target)
    columns = table.data_columns() + table.partition_columns()

    def at(hour, minute=0):
        return datetime(2026, 11, 20, hour, minute, tzinfo=timezone.utc)

    def row(order_id, when, items):
        # SQL literals, not createDataFrame: Spark 3.3's cloudpickle cannot pickle on Python 3.11 from a `-c` script
        stamp = when.strftime("%Y-%m-%d %H:%M:%S")
        return (f"SELECT '{order_id}' AS order_id, TIMESTAMP '{stamp}' AS ordered_at, 'c-1' AS customer_id, 'paid' AS status, "
                f"'EUR' AS currency, 12.50 AS total, array({items}) AS items, "
                f"named_struct('country', 'DE', 'city', 'Berlin', 'express', CAST(NULL AS BOOLEAN)) AS shipping, "
                f"map('WELCOME', 150) AS coupons, 'orders-in' AS source, '0' AS source_partition, '1' AS source_offset, "
                f"TIMESTAMP '{stamp}' AS arrival_time, 0 AS batch_id, DATE '{when.date()}' AS event_date, {when.hour} AS event_hour")

    def frame(rows, item_type):
        types = dict(columns)
        types["items"] = item_type
        union = spark.sql(" UNION ALL ".join(rows))
        return union.select(*(F.col(name).cast(types[name]).alias(name) for name, _ in columns))

    def ms(when):
        return int(when.timestamp() * 1000)

    v1_items = "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>"
    item = "named_struct('sku', 'sku-1', 'quantity', 2, 'unit_price', 6.25)"
    batch0 = frame([row("o-1", at(9, 5), item), row("o-2", at(9, 40), item), row("o-3", at(10, 1), item)], v1_items)
    def hour(when):
        return ms(when) // 3_600_000

    appended0 = append_batch(table, target, batch0, "orders-in:s:0", (ms(at(9, 5)), ms(at(10, 1))))
    # o-1 again in hour 9 with another order time (left out, differing), o-1 in hour 11 (another hour: kept), o-4 new,
    # o-2 again as it was (left out, the same)
    batch1 = frame([row("o-1", at(9, 30), item), row("o-1", at(11, 0), item), row("o-4", at(9, 50), item),
                    row("o-2", at(9, 40), item)], v1_items)
    appended1 = append_batch(table, target, batch1, "orders-in:s:1", (ms(at(9, 30)), ms(at(11, 0))))
    bounds1 = (ms(at(9, 30)), ms(at(11, 0)))
    # every hour of the batch read, the hours the append names (its held rows' hours only), an hour holding no copy
    differing1 = [differing_from_table(table, target, batch1, bounds1), differing_from_table(table, target, batch1, bounds1, appended1.held_hours),
                  differing_from_table(table, target, batch1, bounds1, (hour(at(11)),))]
    # a newer schema version: an optional field inside the items' element struct
    v2_items = "array<struct<sku:string,quantity:int,unit_price:decimal(10,2),gift_note:string>>"
    gift = "named_struct('sku', 'sku-2', 'quantity', 1, 'unit_price', 3.00, 'gift_note', 'for you')"
    batch2 = frame([row("o-5", at(12, 0), gift)], v2_items)
    appended2 = append_batch(table, target, batch2, "orders-in:s:2", (ms(at(12, 0)), ms(at(12, 0))))
    # older-version copies: o-3 as it was (the same), o-5 without the gift note the table holds for it (differing)
    batch3 = frame([row("o-3", at(10, 1), item), row("o-5", at(12, 0), item.replace("sku-1", "sku-2").replace("2, 'unit_price', 6.25", "1, 'unit_price', 3.00"))], v1_items)
    appended3 = append_batch(table, target, batch3, "orders-in:s:3", (ms(at(10, 1)), ms(at(12, 0))))
    bounds3 = (ms(at(10, 1)), ms(at(12, 0)))
    differing3 = [differing_from_table(table, target, batch3, bounds3), differing_from_table(table, target, batch3, bounds3, appended3.held_hours)]
    appended = [appended0, appended1, appended2, appended3]

    stored = spark.table(target.name)
    partitioning = [r.asDict() for r in spark.sql(f"DESCRIBE TABLE {target.name}").collect()]
    return {
        "written": [a.rows for a in appended],
        # the hours of the rows each append left out, as hours of the day (two apart in the last: two ranges read)
        "held_hours": [[h - hour(at(0)) for h in a.held_hours] for a in appended],
        "differing": [differing1, differing3],
        "committed": [committed_rows(spark, target, f"orders-in:s:{n}") for n in range(3)] +
                     [committed_rows(spark, target, "orders-in:s:9")],
        "rows": sorted((r.order_id, r.event_hour) for r in stored.select("order_id", "event_hour").collect()),
        "items_type": stored.schema["items"].dataType.simpleString(),
        "total_type": stored.schema["total"].dataType.simpleString(),
        # the whole element struct, not `items[0].gift_note`: with nested schema pruning, Iceberg reads an older file's
        # list as empty when the only field asked for is one the file lacks (docs/iceberg.md "Reading evolved tables")
        "gift_notes": sorted(str(r.notes) for r in stored.selectExpr("transform(items, i -> i.gift_note) AS notes").collect()),
        "partitioning": [p for p in partitioning if "hours" in str(p.get("data_type", "")) + str(p.get("col_name", ""))],
    }
'''

# The check of an Iceberg dataset's maintenance (test_iceberg_verify.py's docstring says what it settles).
_VERIFY_PART = r'''
def verify_part():
    import io
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
    from tests.spark.test_compaction_verify import extreme_rows_sql, read_back_as_text

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
        try:
            with redirect_stdout(out):
                code = cli.main(["run-local", "--dataset", "extremes", "--lake", lake, "--target-file-mb", "64"])
        finally:
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
    return found
'''

_SCRIPT = r'''
import json, os, sys, traceback
from glue_jobs.session import local_session

lake = sys.argv[1]
spark = local_session("iceberg-lines-and-verify", master="local[1]", iceberg_warehouse=lake)
''' + _LINES_PART + _VERIFY_PART + r'''
found = {}
for name, part in (("lines", lines_part), ("verify", verify_part)):
    try:
        found[name] = part()
    except Exception:  # the other part still runs; this part's test fails with the traceback
        found[name] = {"raised": traceback.format_exc()}
print("ICEBERG-PARTS " + json.dumps(found))
'''

_RUN: dict = {}


def _run_once(root: Path) -> dict:
    datasets = extremes_dataset(root / "datasets", table_format="iceberg")
    shutil.copytree(REPO / "datasets" / "orders", datasets / "orders")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_DATASETS": str(datasets)}
    env.pop("COMPACTION_BUG", None)
    try:
        done = subprocess.run([sys.executable, "-c", _SCRIPT, str(root / "lake")], cwd=REPO, capture_output=True,
                              text=True, timeout=TIMEOUT_SECONDS, env=env)
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr or ""
        return {"failed": f"the shared Iceberg subprocess timed out after {TIMEOUT_SECONDS} s", "stderr": stderr}
    printed = [line for line in done.stdout.splitlines() if line.startswith("ICEBERG-PARTS ")]
    if done.returncode != 0 or not printed:
        return {"failed": f"the shared Iceberg subprocess exited {done.returncode} without its findings",
                "stderr": done.stderr}
    return {"parts": json.loads(printed[-1].removeprefix("ICEBERG-PARTS ")), "stderr": done.stderr}


def iceberg_part(tmp_path_factory, name: str) -> tuple[dict, Path]:
    """Part `name` ("lines" or "verify") of the one Iceberg run of this pytest run (started by the first test asking),
    and the warehouse it wrote (`lake`, the local catalog's). Fails the asking test when the run failed or the part
    raised, with the traceback and the end of the JVM's stderr."""
    if not _RUN:
        root = tmp_path_factory.mktemp("iceberg-shared")
        _RUN.update(_run_once(root), lake=root / "lake")
    assert "failed" not in _RUN, f"{_RUN['failed']} ({name} part):\n{_RUN['stderr'][-4000:]}"
    found = _RUN["parts"][name]
    assert "raised" not in found, f"the {name} part raised:\n{found['raised']}\nstderr:\n{_RUN['stderr'][-2000:]}"
    return found, _RUN["lake"]
