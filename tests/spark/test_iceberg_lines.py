"""The Iceberg lake step on the Spark line this interpreter runs, with the Iceberg runtime the matching Glue version
ships (devtools/jars.py: Spark 3.3 / Glue 4.0 -> Iceberg 1.0.0, 3.5 / 5.0 -> 1.7.1, 4.1 / 6.0 -> 1.11.0). The
end-to-end and kill tests (test_iceberg_lake.py) run on the default line only; this one runs on every line
(`make test-spark33`, `make test-spark41`), in a subprocess because the runtime and the SQL extensions are static
settings of a session of its own.

What it settles per line: the table the job creates (hours() partitions, the lake's nested types), a tagged append
and its lookup by tag, the key-and-hour check that leaves out a key already committed for the same hour (and only
for that hour) and counts the copies it left out that differ from the row kept, and schema evolution in the append: a new optional field inside the items' element struct reaches the
table through `merge-schema` with `write.spark.accept-any-schema` (on Glue 4.0's Iceberg 1.0.0 this was unverified
before this test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = r'''
import json, sys
from datetime import datetime, timezone
from pyspark.sql import functions as F
from glue_jobs.session import local_session, LOCAL_ICEBERG_CATALOG
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.lake.iceberg_lake import IcebergTarget, append_batch, committed_rows, differing_from_table, ensure_table

spark = local_session("iceberg-line", master="local[1]", iceberg_warehouse=sys.argv[1])
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
written0 = append_batch(table, target, batch0, "orders-in:s:0", (ms(at(9, 5)), ms(at(10, 1))))
# o-1 again in hour 9 with another order time (left out, differing), o-1 in hour 11 (another hour: kept), o-4 new,
# o-2 again as it was (left out, the same)
batch1 = frame([row("o-1", at(9, 30), item), row("o-1", at(11, 0), item), row("o-4", at(9, 50), item),
                row("o-2", at(9, 40), item)], v1_items)
written1 = append_batch(table, target, batch1, "orders-in:s:1", (ms(at(9, 30)), ms(at(11, 0))))
differing1 = differing_from_table(table, target, batch1, (ms(at(9, 30)), ms(at(11, 0))))
# a newer schema version: an optional field inside the items' element struct
v2_items = "array<struct<sku:string,quantity:int,unit_price:decimal(10,2),gift_note:string>>"
gift = "named_struct('sku', 'sku-2', 'quantity', 1, 'unit_price', 3.00, 'gift_note', 'for you')"
batch2 = frame([row("o-5", at(12, 0), gift)], v2_items)
written2 = append_batch(table, target, batch2, "orders-in:s:2", (ms(at(12, 0)), ms(at(12, 0))))
# older-version copies: o-3 as it was (the same), o-5 without the gift note the table holds for it (differing)
batch3 = frame([row("o-3", at(10, 1), item), row("o-5", at(12, 0), item.replace("sku-1", "sku-2").replace("2, 'unit_price', 6.25", "1, 'unit_price', 3.00"))], v1_items)
written3 = append_batch(table, target, batch3, "orders-in:s:3", (ms(at(10, 1)), ms(at(12, 0))))
differing3 = differing_from_table(table, target, batch3, (ms(at(10, 1)), ms(at(12, 0))))

stored = spark.table(target.name)
partitioning = [r.asDict() for r in spark.sql(f"DESCRIBE TABLE {target.name}").collect()]
print(json.dumps({
    "written": [written0, written1, written2, written3],
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
}))
'''


def test_the_iceberg_lake_step_on_this_spark_line(tmp_path: Path):
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "warehouse")], cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["written"] == [3, 2, 1, 0]
    assert found["differing"] == [1, 1]  # o-1's other order time; o-5's gift note only the table's copy has
    assert found["committed"] == [3, 2, 1, None]
    assert found["rows"] == [["o-1", 9], ["o-1", 11], ["o-2", 9], ["o-3", 10], ["o-4", 9], ["o-5", 12]]
    assert found["items_type"] == "array<struct<sku:string,quantity:int,unit_price:decimal(10,2),gift_note:string>>"
    assert found["total_type"] == "decimal(12,2)"
    assert found["gift_notes"] == ["['for you']"] + ["[None]"] * 5
    assert found["partitioning"], "no hours() partition field in DESCRIBE TABLE"
