"""glue_jobs/column_seq.py: a column list sent to the JVM once plans what pyspark's own select and agg plan, for
every frame it is used on (the batches of a streaming query reuse one)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from glue_jobs.column_seq import ColumnSeq, aggregate, select


def _frame(spark, rows):
    """A frame of (k, v, s) rows from SQL literals (no Python-side rows: pyspark 3.3 cannot pickle on Python 3.11)."""
    def literal(value):
        if value is None:
            return "NULL"
        if isinstance(value, tuple):
            return f"named_struct('a', CAST({literal(value[0])} AS INT), 'b', CAST({literal(value[1])} AS STRING))"
        return f"'{value}'" if isinstance(value, str) else str(value)

    values = ", ".join(f"({literal(k)}, CAST({v} AS BIGINT), {literal(s)})" for k, v, s in rows)
    return spark.sql(f"SELECT * FROM VALUES {values} AS t(k, v, s)")


def test_select_matches_pyspark_on_each_frame_it_is_used_on(spark):
    columns = [F.col("k"), (F.col("v") * 2).alias("twice"), F.col("s.*"), F.when(F.col("v") > 1, F.lit("big")).alias("size")]
    prepared = ColumnSeq(columns)
    for rows in ([("a", 1, (1, "x")), ("b", 2, None)], [("c", 3, (3, None))]):
        frame = _frame(spark, rows)
        ours = select(frame, prepared)
        assert ours.schema == frame.select(*columns).schema
        assert ours.collect() == frame.select(*columns).collect()
        assert ours.sparkSession is frame.sparkSession
    assert prepared.size == 4


def test_aggregate_matches_groupby_agg_and_agg(spark):
    frame = _frame(spark, [("a", 1, None), ("a", 5, None), ("b", 2, None)])
    by, aggregates = [F.col("k")], [F.count(F.lit(1)).alias("n"), F.sum("v").alias("total"), F.max("v").alias("top")]
    grouped = aggregate(frame, ColumnSeq(by), ColumnSeq(aggregates))
    assert sorted(grouped.collect()) == sorted(frame.groupBy(*by).agg(*aggregates).collect())
    assert grouped.columns == ["k", "n", "total", "top"]
    whole = aggregate(frame, None, ColumnSeq(aggregates))
    assert whole.collect() == frame.agg(*aggregates).collect()
    single = aggregate(frame, None, ColumnSeq([F.sum("v").alias("total")]))
    assert single.collect()[0]["total"] == 8


def test_an_empty_list_is_refused(spark):
    with pytest.raises(ValueError, match="at least one column"):
        ColumnSeq([])
