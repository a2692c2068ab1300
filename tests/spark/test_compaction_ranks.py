"""compaction/transforms.py: the survivors from sorted runs (jvm/glue-functions RankInRuns) are the window's survivors,
and its counts of rows and dropped copies are the window's, whatever the copies' order; without the class, or for a key
it cannot compare, the caller is told to use the window; rows of a key that are not one run fail the pass."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta

import pytest
from pyspark.sql import DataFrame

from compaction import transforms
from compaction.transforms import data_columns, survivors_by_window, survivors_in_runs
from glue_jobs.lake.lake_table import LakeTable

from .test_compaction import HOUR, event, sql_frame


def _copies() -> list[dict]:
    """60 keys with 1-4 copies each (arrival ties, offsets of other lengths, ties broken only by batch_id or by a
    later column), exact copies, and rows without a key."""
    rng = random.Random(7)
    rows = []
    for k in range(60):
        for _ in range(rng.randint(1, 4)):
            row = event(f"id-{k % 23}-{k}", arrival_s=rng.choice([0, 0, 3, 9]), offset=rng.choice([5, 10, 100, 9]),
                        amount=rng.choice([1.0, 2.5]))
            row["batch_id"] = rng.choice([1, 2])
            row["source_partition"] = rng.choice(["0", "1"])
            rows.append(row)
    rows += [dict(rows[0]), dict(rows[5])]  # exact copies: one survives
    rows += [event(None, offset=1), event(None, offset=1), event(None, offset=2, hour=HOUR + timedelta(hours=1))]
    rng.shuffle(rows)
    return rows


def _kept_and_counts(survivors) -> tuple[list[tuple], tuple[int, int]]:
    kept = sorted(tuple("" if v is None else str(v) for v in row) for row in survivors.frame.collect())
    return kept, survivors.counts()


def test_survivors_in_runs_are_the_windows_and_counted_alike(spark):
    rows = _copies()
    frame = sql_frame(spark, rows).repartition(3, "event_id")
    in_runs = survivors_in_runs(frame)
    assert in_runs is not None  # the jar is on local sessions' class path (glue_jobs/session.py)
    assert in_runs.frame.columns == data_columns()
    by_window = _kept_and_counts(survivors_by_window(frame, name="ranks_window"))
    by_runs = _kept_and_counts(in_runs)
    assert by_runs == by_window
    kept, (rows_in, dropped) = by_runs
    assert len(kept) == 60 + 3 and rows_in == len(rows) and dropped == len(rows) - len(kept)  # one per key, keyless all
    assert dropped > 20
    assert "Window" not in in_runs.frame._jdf.queryExecution().executedPlan().toString()


def test_counts_are_taken_once_per_computation_of_the_survivors(spark):
    # The counts are accumulators of the pass that computes the frame: one action, one count of each row.
    rows = _copies()
    in_runs = survivors_in_runs(sql_frame(spark, rows).repartition(2, "event_id"))
    assert in_runs.counts() == (0, 0)  # nothing computed yet
    kept = in_runs.frame.count()
    assert in_runs.counts() == (len(rows), len(rows) - kept)


def test_without_the_class_the_caller_is_told_to_use_the_window(spark, monkeypatch, caplog):
    monkeypatch.setattr(transforms, "RANK_IN_RUNS_CLASS", "com.streamlake.glue.NoSuchRanker")
    assert survivors_in_runs(sql_frame(spark, [event("a")])) is None
    assert "com.streamlake.glue.NoSuchRanker is not on the classpath" in caplog.text


def test_a_key_it_cannot_compare_is_refused_by_name(spark):
    frame = spark.range(3).selectExpr("CAST(id AS DOUBLE) AS k")
    ranker, context = spark._jvm.com.streamlake.glue.RankInRuns, spark.sparkContext._jsc.sc()
    with pytest.raises(Exception, match="key field k has type double"):
        ranker.survivors(frame._jdf, ["k"], context.longAccumulator(), context.longAccumulator())


def test_a_frame_the_class_refuses_falls_back_to_the_window_with_its_reason(spark, caplog):
    # No dataset can declare a double key (glue_jobs/dataset_contract.py _KEY_KINDS), so the table is made here: the
    # path under test is the caller's, for whatever the class throws (missing Spark internals on another build too).
    table = LakeTable(dataclasses.replace(LakeTable.of().dataset, key=("amount",)))
    rows = [event("a", amount=1.0), event("b", amount=1.0), event("c", amount=2.5)]
    frame = sql_frame(spark, rows).repartition(2, "amount")
    assert survivors_in_runs(frame, table) is None
    assert "duplicates ranked with the window: com.streamlake.glue.RankInRuns cannot rank this frame" in caplog.text
    assert "key field amount has type double" in caplog.text
    by_window = survivors_by_window(frame, table, name="ranks_fallback")  # what compaction/staging.py then uses
    assert by_window.frame.count() == 2 and by_window.counts() == (3, 1)


def test_rows_of_a_key_that_are_not_one_run_fail_the_pass(spark):
    # Told the rows come sorted when they do not, the pass would keep a copy of a key per run: it fails instead,
    # naming the key (the compaction's partition fails with its inputs in place).
    frame = sql_frame(spark, [event("b"), event("a"), event("b", offset=1)]).coalesce(1)
    ranker, context = spark._jvm.com.streamlake.glue.RankInRuns, spark.sparkContext._jsc.sc()
    kept = ranker.survivors(frame._jdf, ["event_id"], context.longAccumulator(), context.longAccumulator())
    with pytest.raises(Exception, match=r"the rows are not sorted by the key: a run of key \[a\] after one of \[b\]"):
        DataFrame(kept, spark).collect()
