"""The Iceberg lake step on the Spark line this interpreter runs, with the Iceberg runtime the matching Glue version
ships (devtools/jars.py: Spark 3.3 / Glue 4.0 -> Iceberg 1.0.0, 3.5 / 5.0 -> 1.7.1, 4.1 / 6.0 -> 1.11.0). The
end-to-end and kill tests (test_iceberg_lake.py) run on the default line only; this one runs on every line
(`make test-spark33`, `make test-spark41`), in a subprocess because the runtime and the SQL extensions are static
settings of a session of its own: the one subprocess it shares with test_iceberg_verify.py (tests/spark/iceberg_shared.py,
its "lines" part, where the script is).

What it settles per line: the table the job creates (hours() partitions, the lake's nested types), a tagged append
and its lookup by tag, the key-and-hour check that leaves out a key already committed for the same hour (and only
for that hour) and counts the copies it left out that differ from the row kept, and schema evolution in the append: a new optional field inside the items' element struct reaches the
table through `merge-schema` with `write.spark.accept-any-schema` (on Glue 4.0's Iceberg 1.0.0 this was unverified
before this test)."""

from __future__ import annotations

from .iceberg_shared import iceberg_part


def test_the_iceberg_lake_step_on_this_spark_line(tmp_path_factory):
    found, _ = iceberg_part(tmp_path_factory, "lines")
    assert found["written"] == [3, 2, 1, 0]
    assert found["held_hours"] == [[], [9], [], [10, 12]]  # o-1 and o-2 in hour 9; o-3 in hour 10, o-5 in hour 12
    # o-1's other order time; o-5's gift note only the table's copy has: the same reading every hour of the batch or
    # only the hours the append names, and nothing in an hour that holds no copy (the hours are what is read)
    assert found["differing"] == [[1, 1, 0], [1, 1]]
    assert found["committed"] == [3, 2, 1, None]
    assert found["rows"] == [["o-1", 9], ["o-1", 11], ["o-2", 9], ["o-3", 10], ["o-4", 9], ["o-5", 12]]
    assert found["items_type"] == "array<struct<sku:string,quantity:int,unit_price:decimal(10,2),gift_note:string>>"
    assert found["total_type"] == "decimal(12,2)"
    assert found["gift_notes"] == ["['for you']"] + ["[None]"] * 5
    assert found["partitioning"], "no hours() partition field in DESCRIBE TABLE"
