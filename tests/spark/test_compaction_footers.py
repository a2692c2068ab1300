"""compaction/footers.py (jvm/glue-functions Footers): what the footers of many Parquet files say together, read on
the driver, against what readers the project did not write say of the same files: pyarrow's metadata where it is
installed, Spark's counts of the values on every line."""

from __future__ import annotations

import importlib.util

import pytest
from pyspark.sql import functions as F

from compaction import footers

from .test_compaction import event, write_files


def _spark_written(spark, tmp_path):
    rows = [event(f"k{i}", offset=i) for i in range(7)]
    for row in rows[::3]:
        row["user_id"], row["amount"] = None, None
    paths = write_files(spark, tmp_path / "lake", [rows[:2], rows[2:], [event(None, offset=40)]])
    return [str(p) for p in paths]


def test_rows_schemas_and_non_null_values_are_the_files_own(spark, tmp_path):
    paths = _spark_written(spark, tmp_path)
    nested = str(tmp_path / "nested")
    spark.range(3).select(F.struct(F.col("id").alias("a")).alias("s"), F.array(F.col("id")).alias("l"),
                          F.when(F.col("id") > 0, F.col("id")).alias("n")).coalesce(1).write.parquet(nested)
    paths.append(next(str(p) for p in (tmp_path / "nested").glob("*.parquet")))

    summary = footers.summary(spark, paths)

    frame = spark.read.option("mergeSchema", "true").parquet(*paths)
    assert summary.rows == frame.count() == 11
    assert summary.unschemed == 0
    # the types Spark reads (it reads every column as nullable; the footers keep what the writer said)
    assert {f.name: f.dataType.simpleString() for f in summary.merged().fields} == \
        {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    counts = frame.agg(*(F.count(F.col(c)).alias(c) for c in frame.columns)).first().asDict()
    assert "s" not in summary.non_null and "l" not in summary.non_null  # a leaf's null count is not the column's
    assert summary.non_null == {c: counts[c] for c in frame.columns if c not in ("s", "l")}
    assert summary.non_null["user_id"] == 8 - 3 and summary.non_null["event_id"] == 7 and summary.non_null["n"] == 2


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed on this Spark line")
def test_the_counts_are_pyarrows_and_a_file_it_wrote_has_no_spark_schema(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = _spark_written(spark, tmp_path)
    foreign = tmp_path / "by-pyarrow.parquet"
    pq.write_table(pa.table({"event_id": ["a", None, "c"], "amount": [1.0, 2.0, None]}), foreign)

    summary = footers.summary(spark, [*paths, str(foreign)])

    expected_rows, non_null = 0, {}
    for path in [*paths, str(foreign)]:
        metadata = pq.ParquetFile(path).metadata
        expected_rows += metadata.num_rows
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                non_null[column.path_in_schema] = non_null.get(column.path_in_schema, 0) + group.num_rows - \
                    column.statistics.null_count
    assert summary.rows == expected_rows == 11
    assert summary.non_null == non_null
    assert (summary.unschemed, summary.first_unschemed) == (1, str(foreign))
    assert len(summary.schemas) == 1  # the Spark-written files' one schema


def test_schemas_only_reads_the_schemas_and_no_row_group(spark, tmp_path):
    paths = _spark_written(spark, tmp_path)
    whole, schemas = footers.summary(spark, paths), footers.summary(spark, paths, schemas_only=True)
    assert [s.simpleString() for s in schemas.schemas] == [s.simpleString() for s in whole.schemas]
    assert (schemas.rows, schemas.non_null, whole.rows) == (0, {}, 8)


def test_files_given_with_their_listed_sizes_read_the_same_and_a_wrong_size_fails(spark, tmp_path):
    """With the listing's sizes the footers are read with no status call per file (on S3 a HEAD each) and from the raw
    local file system (no .crc opened): the same summary; a size that is not the file's (rewritten after the listing)
    fails the read instead of summing another file's footer."""
    from pathlib import Path

    paths = _spark_written(spark, tmp_path)
    paths.append(str(tmp_path / "lake" / "with a space.parquet"))
    Path(paths[-1]).write_bytes(Path(paths[0]).read_bytes())
    sizes = [Path(p).stat().st_size for p in paths]
    assert footers.summary(spark, paths, sizes=sizes) == footers.summary(spark, paths)
    assert footers.summary(spark, paths, sizes=sizes, schemas_only=True) == footers.summary(spark, paths, schemas_only=True)

    wrong = [*sizes[:-1], sizes[-1] - 7]
    with pytest.raises(Exception, match="(?i)parquet|magic|footer|EOF|corrupt"):
        footers.summary(spark, paths, sizes=wrong)


def test_parquet_files_reads_exactly_the_paths_as_spark_does(spark, tmp_path):
    """compaction/staging.py parquet_files hands 32 or more paths to the JVM as one string (Scala varargs): the same
    files and rows as reader.parquet(*paths), on every Spark line; a path with a newline takes PySpark's own way."""
    from compaction.staging import parquet_files

    spark.range(400).repartition(40).write.parquet(str(tmp_path / "many"))
    paths = sorted(str(p) for p in (tmp_path / "many").glob("*.parquet"))[:36]
    joined, listed = parquet_files(spark.read, paths), spark.read.parquet(*paths)
    assert sorted(joined.inputFiles()) == sorted(listed.inputFiles()) and len(joined.inputFiles()) == 36
    assert sorted(r.id for r in joined.collect()) == sorted(r.id for r in listed.collect())
