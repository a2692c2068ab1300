"""orders through the local runner (the same micro-batch function the Glue job runs): generated records of
every reason code, duplicates and valid nested orders; the lake read back typed with Spark and with pyarrow
(a reader the project did not write), the dead letters with their reasons, the counts reconciled."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest

from glue_jobs import datasets, local_runner
from glue_jobs.dataset_generate import generate_dataset


@pytest.mark.e2e
def test_orders_through_the_runner_read_back_typed(spark, tmp_path):
    orders = datasets.load("orders")
    expect = generate_dataset(orders, tmp_path / "in", records=600, files=3, bad_ratio=0.05, duplicate_ratio=0.02, seed=3)
    printed = io.StringIO()
    summary = local_runner.run_local(
        input_dir=str(tmp_path / "in"), lake_dir=str(tmp_path / "lake"), dead_letter_dir=str(tmp_path / "dead"),
        checkpoint_dir=str(tmp_path / "cp"), once=True, spark=spark, out=printed, dataset="orders", progress=False,
    )
    # --quiet (progress off): the summary, no line per micro-batch
    assert "summary: records=600 " in printed.getvalue() and "batch 0:" not in printed.getvalue()
    totals = summary.totals()
    assert totals["records_in"] == expect.records
    assert totals["records_written"] == len(expect.valid_keys)
    assert totals["duplicates_collapsed"] == expect.duplicates
    assert totals["dead_letters_by_reason"] == expect.bad_by_reason
    assert totals["records_in"] == totals["records_written"] + totals["dead_letters"] + totals["duplicates_collapsed"]

    lake = spark.read.parquet(str(tmp_path / "lake"))
    types = dict(lake.dtypes)
    assert types["items"] == "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>"
    assert (types["total"], types["ordered_at"], types["shipping"]) == (
        "decimal(12,2)", "timestamp", "struct<country:string,city:string,express:boolean>")
    assert sorted(r.order_id for r in lake.select("order_id").collect()) == sorted(expect.valid_keys)

    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    table = pq.read_table(str(tmp_path / "lake"), partitioning="hive")
    assert table.schema.field("items").type.value_type == pa.struct(
        [("sku", pa.string()), ("quantity", pa.int32()), ("unit_price", pa.decimal128(10, 2))])
    assert table.schema.field("total").type == pa.decimal128(12, 2)
    assert pa.types.is_timestamp(table.schema.field("ordered_at").type)
    row = table.slice(0, 1).to_pylist()[0]
    assert all(isinstance(item["unit_price"], Decimal) for item in row["items"]) and row["items"]
    dead = pq.read_table(str(tmp_path / "dead"), partitioning="hive").to_pylist()
    assert sorted({d["reason"] for d in dead}) == sorted(expect.bad_by_reason)
    assert all(d["detail"] and d["payload"] for d in dead)
