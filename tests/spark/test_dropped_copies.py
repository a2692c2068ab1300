"""The streaming job counts the copies its collapse drops within a micro-batch whose content differs from the copy kept
(glue_jobs/lake/dropped_copies.py; docs/datasets.md "Duplicates"), on every Spark line, with adaptive execution on (a batch
frame outside a streaming query) and off (inside one). The Iceberg append's own drops: tests/spark/test_iceberg_lines.py
(every line) and test_iceberg_lake.py (the local runner, end to end)."""

from __future__ import annotations

import json
import logging

import pytest

from glue_jobs.batch import MicroBatchWriter
from glue_jobs.commit import BatchStats
from glue_jobs.lake import cache_leaf, dropped_copies
from glue_jobs.local_runner import RunSummary
from glue_jobs.metrics import DIFFERING_DUPLICATES, metric_data
from glue_jobs.session import session_conf

from .streaming_support import json_envelope

NOW = 1_700_000_000.0
T = 1_699_999_200_000  # 2023-11-14T22:00Z


def _click(event_id: str, event_type: str = "click") -> str:
    return json.dumps({"event_id": event_id, "event_type": event_type, "event_time": T})


def _order(order_id: str, **changed) -> str:
    order = {"order_id": order_id, "ordered_at": "2023-11-14T22:10:00+00:00", "customer_id": "c-1", "status": "paid",
             "currency": "EUR", "total": 10.5, "items": [{"sku": "s-1", "quantity": 1, "unit_price": 10.5}],
             "coupons": {"WELCOME": 150, "AUTUMN": 50}}
    return json.dumps({**order, **changed})


def _write(spark, tmp_path, payloads, offsets, dataset="clickstream"):
    writer = MicroBatchWriter(spark, source_name="s", lake_path=str(tmp_path / "lake"), dead_letter_path=str(tmp_path / "dead"),
                              checkpoint_path=str(tmp_path / "cp"), clock=lambda: NOW, stream_id="abcd1234", dataset=dataset)
    return writer(json_envelope(spark, payloads, offsets=offsets).repartition(2), 0)


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_the_dropped_copies_that_differ_from_the_kept_one_are_counted(spark, tmp_path, adaptive):
    payloads = [
        _click("a"), _click("a"), _click("a", "purchase"),  # the first kept; the replay is the same, the purchase differs
        _click("b"), _click("b"),  # a replay only
        _click("d", "purchase"), _click("d"), _click("d"),  # the first to arrive differs from both later copies
        _click("c"),
    ]
    offsets = ["0", "5", "6", "1", "7", "2", "8", "9", "3"]  # the lowest offset arrived first (same arrival time)
    with session_conf(spark, {"spark.sql.adaptive.enabled": adaptive}):
        stats = _write(spark, tmp_path, payloads, offsets)
    assert (stats.records_written, stats.duplicates_collapsed, stats.differing_duplicates) == (4, 5, 3) and stats.reconciles
    kept = {r.event_id: r.event_type for r in spark.read.parquet(str(tmp_path / "lake")).collect()}
    assert kept == {"a": "click", "b": "click", "c": "click", "d": "purchase"}
    differing = [m for m in metric_data(stats, "dev") if m["MetricName"] == DIFFERING_DUPLICATES]
    assert differing == [{"MetricName": DIFFERING_DUPLICATES, "Value": 3.0, "Unit": "Count",
                          "Dimensions": [{"Name": "Dataset", "Value": "clickstream"}, {"Name": "Environment", "Value": "dev"}]}]
    assert BatchStats.from_json(stats.to_json()) == stats  # the commit marker keeps it


def test_a_map_in_another_order_and_a_replay_are_the_same_a_nested_change_is_not(spark, tmp_path):
    payloads = [
        _order("o-1"), _order("o-1", coupons={"AUTUMN": 50, "WELCOME": 150}),  # the map's entries in another order
        _order("o-2"), _order("o-2", items=[{"sku": "s-1", "quantity": 2, "unit_price": 10.5}]),  # a nested change
    ]
    stats = _write(spark, tmp_path, payloads, ["1", "2", "3", "4"], dataset="orders")
    assert (stats.records_written, stats.duplicates_collapsed, stats.differing_duplicates) == (2, 2, 1)
    assert not [m for m in metric_data(BatchStats(**{**json.loads(stats.to_json()), "differing_duplicates": 0}), "dev")
                if m["MetricName"] == DIFFERING_DUPLICATES]  # published only when non-zero


def test_copies_of_a_record_no_write_takes_leave_nothing_to_observe(spark, tmp_path, monkeypatch, caplog):
    """The only duplicated key is one no write takes (glue_jobs/lake/unwritable.py): the batch written around it ranks nothing.
    A ranking filtered down to no key is left out, not planned empty: Spark prunes an empty plan and the observation
    on it (3.5 then never answers it; 4.1 answers an empty row its Observation.get refuses)."""
    from glue_jobs.commit import crash_points

    monkeypatch.setenv(crash_points.UNWRITABLE_ENV, "bad")
    with caplog.at_level(logging.ERROR, logger="glue_jobs.lake.dropped_copies"):
        stats = _write(spark, tmp_path, [_click("a"), _click("bad"), _click("bad", "purchase")], ["1", "2", "3"])
    assert (stats.records_written, stats.dead_letters, stats.differing_duplicates) == (1, 2, 0) and stats.reconciles
    assert "not observed" not in caplog.text


def test_a_batch_without_copies_counts_none_and_observes_nothing(spark, tmp_path):
    stats = _write(spark, tmp_path, [_click("a"), _click("b")], ["1", "2"])
    assert (stats.duplicates_collapsed, stats.differing_duplicates) == (0, 0)


def test_an_observation_spark_never_delivers_is_logged_not_waited_for(spark, caplog):
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    never = Observation()  # observed on a frame no action runs: what a plan that lost its observation leaves waiting
    spark.range(1).observe(never, F.count(F.lit(1)).alias("losers"))
    with caplog.at_level(logging.ERROR, logger="glue_jobs.lake.dropped_copies"):
        assert dropped_copies.counted(never, timeout_seconds=0.2) is None
    assert "not observed (nothing within 0.2s)" in caplog.text
    assert dropped_copies.counted(None) == (0, 0)


def test_the_run_summary_and_each_batch_line_say_how_many_copies_differed():
    summary = RunSummary()
    summary.add(BatchStats(source="s", batch_id=0, records_in=5, records_written=3, dead_letters=0, duplicates_collapsed=2,
                           differing_duplicates=1))
    summary.add(BatchStats(source="s", batch_id=1, records_in=2, records_written=1, dead_letters=0, duplicates_collapsed=1))
    assert "duplicates=3 (1 differing from the copy kept) batches=2" in summary.render()
    quiet = RunSummary()
    quiet.add(BatchStats(source="s", batch_id=0, records_in=2, records_written=1, dead_letters=0, duplicates_collapsed=1))
    assert "duplicates=1 batches=1" in quiet.render()


@pytest.mark.parametrize("hashes", [2, 12])
def test_the_key_hashes_picked_are_not_written_into_generated_code(spark, hashes):
    """Generated code that holds a batch's values is compiled again for every batch (glue_jobs/batch_constants.py):
    the candidates' filter keeps the hashes as data, an array literal or an InSet, never as values in the code."""
    from pyspark.sql import functions as F

    listed = json.dumps([-7_000_000_000_123 + n for n in range(hashes)])
    frame = spark.range(50).select(F.xxhash64("id").alias("_key"))
    picked = dropped_copies.with_keys(frame, listed, "_key")
    code = spark._jvm.org.apache.spark.sql.execution.debug.package.codegenString(picked._jdf.queryExecution().executedPlan())
    body = code.split("Generated code:", 1)[1]
    assert "_key" in code and "7000000000" not in body  # line numbers and comments hold no value either
    assert picked.count() == 0


@pytest.mark.parametrize("reachable", [True, False])
def test_the_key_hashes_past_an_array_literal_are_an_inset_built_in_the_jvm_or_else_an_in_list(spark, monkeypatch, caplog,
                                                                                                 reachable):
    """Past IN_SET_FROM hashes the candidates' filter is Spark's InSet, made in the JVM from the hashes as data (no SQL
    text of thousands of literals to parse and analyze); where the internals it needs are not reachable, an IN list,
    logged: the same rows either way."""
    from py4j.protocol import Py4JError
    from pyspark.sql import functions as F

    frame = spark.range(200).select(F.col("id"), F.xxhash64("id").alias("_key"))
    wanted = {row["id"]: row["_key"] for row in frame.filter("id % 9 = 0").collect()}
    listed = json.dumps([*wanted.values(), *(-7_000_000_000_123 + n for n in range(30))])
    if not reachable:
        monkeypatch.setattr(cache_leaf, "_WARNED", set())

        def unreachable(*_):
            raise Py4JError("no such class")

        monkeypatch.setattr(dropped_copies, "frame_of", unreachable)
    with caplog.at_level(logging.WARNING, logger="glue_jobs.lake.dropped_copies"):
        picked = dropped_copies.with_keys(frame, listed, "_key")
        dropped_copies.with_keys(frame, listed, "_key")
    plan = picked._jdf.queryExecution().analyzed().toString()
    assert ("INSET" in plan.upper()) is reachable and (" IN (" in plan.upper()) is not reachable
    assert caplog.text.count("an IN list instead") == (0 if reachable else 1)  # once, not a line a batch
    assert sorted(row["id"] for row in picked.collect()) == sorted(wanted) and len(wanted) == 23
