"""The compaction benchmark's generated hour (bench/bench_compaction.py `generate`, also bench_iceberg's small files):
file b<i> holds batch i's rows in id order, as when a task wrote each file. The names it renames come from Spark's
writer (part-<task>-<job>-c<n>), so this runs on every Spark line."""

from __future__ import annotations

from pyspark.sql import functions as F


def test_each_generated_file_holds_its_own_batch_in_id_order(spark, tmp_path):
    from bench.bench_compaction import generate  # sets nothing on import (tests/ops/test_bench_report.py)

    files, rows_per_file = 12, 5  # four tasks of three files each
    generate(spark, tmp_path / "hour", files, rows_per_file)

    names = {p.name for p in (tmp_path / "hour").iterdir()}
    assert names == {f"part-clickstream-b{i}-0.snappy.parquet" for i in range(files)}
    rows = spark.read.parquet(str(tmp_path / "hour")).select(
        F.input_file_name().alias("file"), "batch_id", F.col("source_offset").cast("long").alias("offset")).collect()
    by_file: dict[str, list] = {}
    for row in rows:
        by_file.setdefault(row.file.rsplit("/", 1)[-1], []).append(row)
    for i in range(files):
        held = by_file[f"part-clickstream-b{i}-0.snappy.parquet"]
        assert [r.batch_id for r in held] == [i] * rows_per_file
        assert [r.offset for r in held] == list(range(i * rows_per_file, (i + 1) * rows_per_file))
