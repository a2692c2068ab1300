"""compaction/transforms.py: the duplicate ranks from sorted runs (jvm/glue-functions RankInRuns) keep the window's
survivors and drop as many rows, whatever the copies' order; without the class, or for a key it cannot compare,
the caller is told to use the window."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta

import pytest

from compaction import transforms
from compaction.transforms import (
    DUPLICATE_RANK,
    data_columns,
    drop_ranked_duplicates,
    rank_duplicates,
    rank_duplicates_in_runs,
)
from glue_jobs.lake_table import LakeTable

from .test_compaction import HOUR, event, literal_frame


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


def _survivors(ranked) -> tuple[list[tuple], int]:
    kept = sorted(tuple("" if v is None else str(v) for v in row) for row in drop_ranked_duplicates(ranked).collect())
    dropped = ranked.filter(f"{DUPLICATE_RANK} > 1").count()
    return kept, dropped


def test_ranks_in_runs_keep_the_windows_survivors(spark):
    frame = literal_frame(spark, _copies()).repartition(3, "event_id")
    in_runs = rank_duplicates_in_runs(frame)
    assert in_runs is not None  # the jar is on local sessions' class path (glue_jobs/session.py)
    assert in_runs.columns == [*data_columns(), DUPLICATE_RANK]
    by_window, by_runs = _survivors(rank_duplicates(frame)), _survivors(in_runs)
    assert by_runs == by_window
    kept, dropped = by_runs
    assert dropped > 20 and len(kept) == 60 + 3  # one per key, and every keyless row
    assert "Window" not in in_runs._jdf.queryExecution().executedPlan().toString()


def test_without_the_class_the_caller_is_told_to_use_the_window(spark, monkeypatch, caplog):
    monkeypatch.setattr(transforms, "RANK_IN_RUNS_CLASS", "com.streamlake.glue.NoSuchRanker")
    assert rank_duplicates_in_runs(literal_frame(spark, [event("a")])) is None
    assert "com.streamlake.glue.NoSuchRanker is not on the classpath" in caplog.text


def test_a_key_it_cannot_compare_is_refused_by_name(spark):
    frame = spark.range(3).selectExpr("CAST(id AS DOUBLE) AS k")
    ranker = spark._jvm.com.streamlake.glue.RankInRuns
    with pytest.raises(Exception, match="key field k has type double"):
        ranker.rank(frame._jdf, ["k"], DUPLICATE_RANK)


def test_a_frame_the_class_refuses_falls_back_to_the_window_with_its_reason(spark, caplog):
    # No dataset can declare a double key (glue_jobs/dataset_contract.py _KEY_KINDS), so the table is made here: the
    # path under test is the caller's, for whatever the class throws (missing Spark internals on another build too).
    table = LakeTable(dataclasses.replace(LakeTable.of().dataset, key=("amount",)))
    frame = literal_frame(spark, [event("a", amount=1.0), event("b", amount=1.0), event("c", amount=2.5)]).repartition(2, "amount")
    assert rank_duplicates_in_runs(frame, table) is None
    assert "duplicates ranked with the window: com.streamlake.glue.RankInRuns cannot rank this frame" in caplog.text
    assert "key field amount has type double" in caplog.text
    by_window = rank_duplicates(frame, table)  # what compaction/staging.py Stager._rank then uses
    assert by_window.filter(f"{DUPLICATE_RANK} > 1").count() == 1
