"""Compaction's check before it deletes (compaction/verify.py), on every Spark line: a bug injected into the rows it
stages (a column dropped, rows dropped, a key nulled: compaction/faults.py) and input files that are not the dataset's
each stop the partition with its inputs in place and the run failing; differing duplicates are counted, in nested
columns and maps too; values at the ends of their types' ranges survive compaction and read back equal by Spark and
pyarrow."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from compaction import __main__ as cli
from compaction import staging
from compaction.faults import BUG_ENV, FaultInjector
from compaction.job import Compactor
from compaction.metrics import DIFFERING_DUPLICATES, LogMetricSink
from compaction.settings import CompactionSettings
from glue_jobs import datasets
from glue_jobs.lake.lake_table import LakeTable

from .test_compaction import AFTER_HOUR, HOUR, assert_clean, event, sql_frame, write_files

PARTITION = f"event_date={HOUR:%Y-%m-%d}/event_hour={HOUR.hour}"


def _compact(spark, lake: Path, *, bug: str = "", dataset: str = "clickstream"):
    settings = CompactionSettings(lake_path=str(lake), dataset=dataset, target_file_bytes=128 * 1024 * 1024, hour=HOUR,
                                  delete_threads=2)
    sink = LogMetricSink("test")
    return Compactor(spark, settings, sink=sink, faults=FaultInjector("", bug=bug), now=AFTER_HOUR).run(), sink


def _snapshot(lake: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (lake / PARTITION).glob("*.parquet")}


def _twenty_keys(spark, lake: Path) -> None:
    """20 keys in three files, two of them twice (a later copy from a higher offset), and one row without a key."""
    rows = [event(f"k{i:02d}", offset=i) for i in range(20)]
    write_files(spark, lake, [rows[:8], rows[8:], [event("k03", arrival_s=5, offset=30), event("k11", arrival_s=5, offset=31),
                                                  event(None, offset=40)]])


def _assert_stopped_with_inputs_intact(summary, sink, lake: Path, before: dict[str, bytes], *checks: str) -> str:
    (failed,) = summary.of("failed")
    assert failed.error.startswith(f"CheckFailed: compaction check failed for {PARTITION}: "), failed.error
    for words in checks:
        assert words in failed.error, failed.error
    assert _snapshot(lake) == before  # every input in place, byte for byte, and nothing published
    assert_clean(lake)
    assert not summary.succeeded and {m.name: m.value for m in sink.published}["CompactionSucceeded"] == 0
    return failed.error


@pytest.mark.parametrize(("bug", "checks"), [
    # the column is not in the staged files: their schema says so, and its values are gone
    ("drop_column", ["column `event_type` of the input files is not in the output",
                     "column `event_type` non-null count 0 in the output, 21 expected"]),
    # the footers' row count is the first check to see it
    ("drop_rows", ["staged ", "expected 21 (input rows - duplicates)"]),
])
def test_an_injected_bug_stops_compaction_with_the_inputs_intact(spark, tmp_path, bug, checks):
    lake = tmp_path / "lake"
    _twenty_keys(spark, lake)
    before = _snapshot(lake)

    summary, sink = _compact(spark, lake, bug=bug)

    _assert_stopped_with_inputs_intact(summary, sink, lake, before, *checks)
    summary, _ = _compact(spark, lake)  # the same inputs, without the bug: compacted, every key once
    (done,) = summary.of("compacted")
    assert (done.rows_in, done.duplicates, done.rows_out) == (23, 2, 21)


def test_a_nulled_key_fails_the_cli_run_with_exit_1(spark, tmp_path, monkeypatch, capsys):
    lake = tmp_path / "lake"
    _twenty_keys(spark, lake)
    before = _snapshot(lake)
    monkeypatch.setenv(BUG_ENV, "null_key")

    code = cli.main(["run-local", "--dataset", "clickstream", "--lake", str(lake), "--hour", f"{HOUR:%Y-%m-%dT%H}",
                     "--grace-minutes", "0"])

    printed = capsys.readouterr().out
    assert code == 1, printed
    assert f"{PARTITION}  FAILED: CheckFailed: compaction check failed for {PARTITION}:" in printed
    for words in ("rows without a key", "in the output, 1 in the inputs", "the set of keys differs",
                  "column `event_id` non-null count"):
        assert words in printed
    assert _snapshot(lake) == before
    assert_clean(lake)


def test_an_input_file_of_another_dataset_fails_the_check(spark, tmp_path):
    lake = tmp_path / "lake"
    write_files(spark, lake, [[event("a")], [event("b")]])
    order = ("SELECT 'o-1' AS order_id, TIMESTAMP '2026-01-01 05:10:00' AS ordered_at, 'c-1' AS customer_id, "
             "'paid' AS status, 'EUR' AS currency, CAST(12.50 AS DECIMAL(12,2)) AS total, "
             "array(named_struct('sku', 's', 'quantity', 1, 'unit_price', CAST(12.50 AS DECIMAL(10,2)))) AS items")
    scratch = tmp_path / "orders"
    spark.sql(order).coalesce(1).write.parquet(str(scratch))
    shutil.move(next(scratch.glob("*.parquet")), lake / PARTITION / "part-orders-b0-0.snappy.parquet")
    before = _snapshot(lake)

    summary, sink = _compact(spark, lake)

    error = _assert_stopped_with_inputs_intact(summary, sink, lake, before, "column `order_id` (string) is not a column of clickstream")
    assert "column `items` (array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>)" in error


def test_an_input_file_with_a_column_the_dataset_lacks_fails_the_check(spark, tmp_path):
    lake = tmp_path / "lake"
    write_files(spark, lake, [[event("a")]])
    scratch = tmp_path / "extra"
    sql_frame(spark, [event("b")]).withColumn("coupon", F.lit("WELCOME")).coalesce(1).write.parquet(str(scratch))
    shutil.move(next(scratch.glob("*.parquet")), lake / PARTITION / "part-clickstream-b9-0.snappy.parquet")
    before = _snapshot(lake)

    summary, sink = _compact(spark, lake)

    _assert_stopped_with_inputs_intact(summary, sink, lake, before, "column `coupon` (string) is not a column of clickstream")


@pytest.fixture(params=["runs", "window"])
def ranking(request, monkeypatch):
    """Each test that takes it runs twice: with the survivors and the dropped copies' account from jvm/glue-functions
    RankInRuns (where the jar is loaded, as on Glue), and from Spark's window and content hashes (without the jar)."""
    if request.param == "window":
        monkeypatch.setattr(staging, "survivors_in_runs", lambda *args, **kwargs: None)
    return request.param


def test_differing_duplicates_are_counted(spark, tmp_path, ranking):
    """The first arrival is kept (docs/datasets.md "Duplicates"); a dropped copy whose fields differ from it is counted,
    one that differs only where it arrived from is a replay, and so is one whose double is -0.0 for 0.0 or NaN for
    NaN (equal in Spark's hash of either)."""
    lake = tmp_path / "lake"
    write_files(spark, lake, [
        [event("same", offset=1), event("one", offset=2), event("two", offset=3), event("zero", offset=4, amount=0.0),
         event("nan", offset=5, amount=float("nan"))],
        [event("same", arrival_s=9, offset=11, source="replayer"),  # a replay: only where and when it arrived differ
         event("one", arrival_s=9, offset=12, amount=7.5),  # one field differs: counted
         event("two", arrival_s=9, offset=13, amount=2.0), event("two", arrival_s=10, offset=14, amount=2.0),  # both
         event("zero", arrival_s=9, offset=15, amount=-0.0), event("nan", arrival_s=9, offset=16, amount=float("nan"))],
    ])

    summary, sink = _compact(spark, lake)

    (result,) = summary.of("compacted")
    assert (result.duplicates, result.differing_duplicates, result.rows_out) == (6, 3, 5)
    kept = sorted((r.event_id, r.source_offset) for r in spark.read.parquet(str(lake / PARTITION)).collect())
    assert kept == [("nan", "5"), ("one", "2"), ("same", "1"), ("two", "3"), ("zero", "4")]  # the first arrivals
    [metric] = [m for m in sink.published if m.name == DIFFERING_DUPLICATES]
    assert (metric.value, metric.dataset) == (3, "clickstream")
    out = io.StringIO()
    cli.print_summary(summary, out=out)
    printed = out.getvalue()
    assert "duplicates removed 6 (3 differing from the copy kept)" in printed
    assert printed.rstrip().endswith("3 dropped duplicate(s) differed from the copy kept")


def test_orders_nested_columns_and_maps_are_compacted_checked_and_compared_by_content(spark, tmp_path, ranking):
    """The orders lake (a list of records, a record, a map): a copy whose map holds the same entries in another order
    is the same content; one whose line items differ is counted."""
    table = LakeTable.of("orders")

    def order(order_id, offset, *, coupons="map('A', 1, 'B', 2)", quantity=2):
        return (f"SELECT '{order_id}' AS order_id, TIMESTAMP '2026-01-01 05:10:00' AS ordered_at, 'c-1' AS customer_id, "
                f"'paid' AS status, 'EUR' AS currency, CAST(12.50 AS DECIMAL(12,2)) AS total, "
                f"array(named_struct('sku', 's-1', 'quantity', {quantity}, 'unit_price', CAST(6.25 AS DECIMAL(10,2)))) AS items, "
                f"named_struct('country', 'DE', 'city', CAST(NULL AS STRING), 'express', true) AS shipping, "
                f"{coupons} AS coupons, 'orders-in' AS source, '0' AS source_partition, '{offset}' AS source_offset, "
                f"TIMESTAMP '2026-01-01 05:11:00' + INTERVAL {offset} SECONDS AS arrival_time, CAST(0 AS BIGINT) AS batch_id")

    lake = tmp_path / "lake"
    files = [[order("o-1", 1), order("o-2", 2)], [order("o-1", 3, coupons="map('B', 2, 'A', 1)"), order("o-2", 4, quantity=3)]]
    (lake / PARTITION).mkdir(parents=True)
    types = dict(table.data_columns())
    for i, rows in enumerate(files):
        scratch = tmp_path / f"scratch-{i}"
        frame = spark.sql(" UNION ALL ".join(rows))
        frame.select(*(F.col(c).cast(t).alias(c) for c, t in types.items())).coalesce(1).write.parquet(str(scratch))
        shutil.move(next(scratch.glob("*.parquet")), lake / PARTITION / f"part-orders-b{i}-0.snappy.parquet")

    summary, _ = _compact(spark, lake, dataset="orders")

    (result,) = summary.of("compacted")
    assert (result.rows_in, result.duplicates, result.differing_duplicates, result.rows_out) == (4, 2, 1, 2)
    kept = spark.read.parquet(str(lake / PARTITION)).orderBy("order_id").collect()
    assert [(r.order_id, r.source_offset, r.items[0].quantity) for r in kept] == [("o-1", "1", 2), ("o-2", "2", 2)]


# ---- values at the ends of their ranges -----------------------------------------------------------------------

EXTREME_DAYS = ["0001-01-01", "1582-10-04", "1582-10-15", "1899-12-31", "9999-12-31"]
EXTREME_MOMENTS = ["0001-01-01 00:00:00.000001", "1582-10-04 23:59:59.999999", "1582-10-15 00:00:00.000000",
                   "1899-12-31 23:59:59.999999", "9999-12-31 23:59:59.999999"]
EXTREME_AMOUNTS = ["9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999",
                   "0.0000000001", "-0.0000000001", "1234567890123456789012345678.0123456789"]


def extremes_dataset(root: Path, *, table_format: str = "parquet") -> Path:
    """A dataset folder `extremes` under `root` (STREAMLAKE_DATASETS): a date, a timestamp and a decimal(38,10)."""
    folder = root / "extremes"
    folder.mkdir(parents=True)
    schema = {"type": "record", "name": "Extreme", "namespace": "test.extremes", "fields": [
        {"name": "id", "type": "string"},
        {"name": "at", "type": "long"},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "moment", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10}],
         "default": None}]}
    (folder / "schema.v1.avsc").write_text(json.dumps(schema))
    (folder / "dataset.json").write_text(json.dumps({
        "description": "values at the ends of their types' ranges", "key": ["id"], "table_format": table_format,
        "event_time": {"field": "at", "format": "epoch_millis", "not_before": "2000-01-01T00:00:00Z", "max_future": "PT24H"}}))
    (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}))
    return root


def extreme_rows_sql(hour_start: str) -> str:
    """The extreme values as one SQL query of the lake's data columns (SQL literals: Spark 3.3's pickling of Python
    functions fails on Python 3.11, and pyspark's datetimes go through the local time zone)."""
    rows = []
    for i, (day, moment, amount) in enumerate(zip(EXTREME_DAYS, EXTREME_MOMENTS, EXTREME_AMOUNTS, strict=True)):
        rows.append(f"SELECT 'x{i}' AS id, TIMESTAMP '{hour_start}' + INTERVAL {i} MINUTES AS at, DATE '{day}' AS day, "
                    f"TIMESTAMP '{moment}' AS moment, CAST('{amount}' AS DECIMAL(38,10)) AS amount, 'test' AS source, "
                    f"'0' AS source_partition, '{i}' AS source_offset, TIMESTAMP '{hour_start}' AS arrival_time, "
                    f"CAST({i} AS BIGINT) AS batch_id")
    return " UNION ALL ".join(rows)


def read_back_as_text(frame) -> list[tuple]:
    """Dates and times as Spark prints them (pyspark's datetimes go through the local time zone), decimals as Python's."""
    return sorted((r.id, r.day, r.moment, r.amount) for r in frame.select(
        "id", F.col("day").cast("string").alias("day"), F.date_format("moment", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("moment"),
        "amount").collect())


EXPECTED_TEXT = [(f"x{i}", d, m, Decimal(a)) for i, (d, m, a) in enumerate(zip(EXTREME_DAYS, EXTREME_MOMENTS, EXTREME_AMOUNTS,
                                                                             strict=True))]


def test_extreme_values_survive_compaction_and_read_back_equal_by_spark_and_pyarrow(spark, tmp_path, monkeypatch):
    """Years 1 and 9999, both sides of the Julian-Gregorian switch, 1899-12-31 and decimals at full precision, in two
    input files compacted into one: what Spark 3.x refused to write without the job's CALENDAR_SETTINGS (the compaction
    session is the job's: glue_jobs/session.local_session and job_spark_conf on Glue)."""
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(extremes_dataset(tmp_path / "datasets")))
    assert spark.conf.get("spark.sql.parquet.datetimeRebaseModeInWrite") == "CORRECTED"
    lake = tmp_path / "lake"
    table = LakeTable.of("extremes")
    columns = [name for name, _ in table.data_columns()]
    assert dict(table.data_columns())["amount"] == "decimal(38,10)"
    scratch = tmp_path / "scratch"
    spark.sql(extreme_rows_sql(f"{HOUR:%Y-%m-%d %H}:00:00")).select(*columns).repartition(2, "id").write.parquet(str(scratch))
    (lake / PARTITION).mkdir(parents=True)
    for i, part in enumerate(sorted(scratch.glob("*.parquet"))):
        shutil.move(part, lake / PARTITION / f"part-extremes-b{i}-0.snappy.parquet")

    summary, _ = _compact(spark, lake, dataset="extremes")

    (result,) = summary.of("compacted")
    assert (result.files_before, result.files_after, result.rows_out) == (2, 1, 5)
    (compacted,) = (lake / PARTITION).glob("*.parquet")
    assert read_back_as_text(spark.read.parquet(str(compacted))) == EXPECTED_TEXT
    if importlib.util.find_spec("pyarrow") is None:
        return  # the Spark lines' own venvs have no pyarrow; the main one reads it back below
    from datetime import date, datetime

    import pyarrow.parquet as pq

    rows = sorted(pq.read_table(str(compacted), coerce_int96_timestamp_unit="us").to_pylist(), key=lambda r: r["id"])
    assert [r["day"] for r in rows] == [date.fromisoformat(d) for d in EXTREME_DAYS]
    assert [r["moment"].replace(tzinfo=None) for r in rows] == [datetime.fromisoformat(m) for m in EXTREME_MOMENTS]
    assert [r["amount"] for r in rows] == [Decimal(a) for a in EXTREME_AMOUNTS]
