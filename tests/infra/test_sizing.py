"""Sizing arithmetic against hand-computed cases (prices from config/prices.json)."""

from __future__ import annotations

import json

import pytest

from devtools import sizing
from infra.config import load_config, parse_config, update_raw

PRICES = sizing.load_prices()


def test_1k_events_of_1kb():
    # design load = 1000 * 1.3 = 1300 ev/s = 1.3 MB/s -> bytes in 1.3 shards, records in 1.3, out 0.65 -> 2 shards
    load = sizing.Load(1000, 1, 120, 25_000)
    rec = sizing.recommend(load, prices=PRICES)
    assert (rec.kinesis_shards, rec.kinesis_shards_by) == (2, "bytes in (1 MB/s per shard)")
    assert rec.cores_needed == 1  # ceil(1300 / 25000)
    assert (rec.worker_type, rec.max_workers) == ("G.025X", 2)  # 1 executor + 1 driver
    assert rec.kafka_partitions == 1  # max(ceil(1.3 MB/s / 5 MB/s), 1 core)
    assert rec.window_size_seconds == 60  # half of 120 s
    assert rec.max_offsets_per_trigger == 156_000  # 1300 * 60 * 2
    assert rec.max_fetch_records_per_shard == 78_000  # 156000 / 2 shards
    # 2 shards * 730 h * 0.015 + 1000*3600*730 records * 1 PUT unit / 1e6 * 0.014
    assert rec.monthly_cost["kinesis_provisioned"] == pytest.approx(2 * 730 * 0.015 + 2628 * 0.014, abs=0.01)
    assert rec.monthly_cost["glue_streaming"] == pytest.approx(2 * 0.25 * 730 * 0.44, abs=0.01)  # 160.60


def test_10k_and_100k_events_of_1kb():
    ten = sizing.recommend(sizing.Load(10_000, 1, 120, 25_000), prices=PRICES)
    assert ten.kinesis_shards == 13  # 13 MB/s in
    assert ten.kafka_partitions == 3  # ceil(13/5)=3 > 1 core
    assert (ten.worker_type, ten.max_workers) == ("G.025X", 2)
    hundred = sizing.recommend(sizing.Load(100_000, 1, 120, 25_000), prices=PRICES)
    assert hundred.kinesis_shards == 130
    assert hundred.cores_needed == 6  # ceil(130000 / 25000)
    assert (hundred.worker_type, hundred.max_workers) == ("G.025X", 4)  # 3 executors x 2 cores + driver
    assert hundred.kafka_partitions == 26


def test_small_records_are_limited_by_record_count_and_big_loads_by_worker_size():
    rec = sizing.recommend(sizing.Load(5_000, 0.1, 60, 25_000, headroom=0), prices=PRICES)
    assert (rec.kinesis_shards, rec.kinesis_shards_by) == (5, "records in (1,000/s per shard)")
    assert rec.window_size_seconds == 30
    assert sizing.choose_workers(8, "4.0") == ("G.025X", 5)
    assert sizing.choose_workers(9, "4.0") == ("G.1X", 4)  # ceil(9/4) = 3 executors + driver
    assert sizing.choose_workers(121, "5.0") == ("G.2X", 17)  # 121/4 > 30 executors -> ceil(121/8)=16 + 1


def test_invalid_load_is_refused():
    with pytest.raises(sizing.SizingError, match="events_per_second: -5 is out of range"):
        sizing.Load(-5, 1, 60, 1000)


def test_environment_cost_of_the_shipped_dev_config():
    """dev runs clickstream, orders and the routed events in one job (streaming_jobs "ingest": 2 x G.025X): one job
    priced, by its own block; without the grouping, each source's job at the environment's 4 x G.025X."""
    dev = load_config().get("dev")
    cost = sizing.environment_cost(dev, PRICES)
    assert cost == {
        "kinesis:clickstream": round(730 * 0.04, 2),  # one on-demand stream
        "kinesis:orders": round(730 * 0.04, 2),  # dev carries orders on a second on-demand stream
        "kinesis:events": round(730 * 0.04, 2),  # and page_views and checkouts on a third, routed by `kind`
        "glue_streaming:ingest": round(2 * 0.25 * 730 * 0.44, 2),  # one job, 2 x G.025X at 0.25 DPU
        "glue_compaction": round(2 * 1 * (5 / 60) * 730 * 0.29, 2),  # flex
    }
    assert sizing.environment_cost(dev, PRICES, streaming_workers="min") == cost  # 2 workers: the floor already
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    ungrouped = parse_config(update_raw(raw, "dev", "streaming_jobs", [])).get("dev")
    cost = sizing.environment_cost(ungrouped, PRICES)
    assert cost["glue_streaming:clickstream"] == cost["glue_streaming:orders"] == cost["glue_streaming:events"] == round(
        4 * 0.25 * 730 * 0.44, 2)
    low = sizing.environment_cost(ungrouped, PRICES, streaming_workers="min")
    assert low["glue_streaming:clickstream"] == low["glue_streaming:orders"] == low["glue_streaming:events"] == round(
        2 * 0.25 * 730 * 0.44, 2)  # the floor
    assert {k: v for k, v in low.items() if not k.startswith("glue_streaming:")} == {
        k: v for k, v in cost.items() if not k.startswith("glue_streaming:")}
    with pytest.raises(ValueError, match="'most' is not 'max' or 'min'"):
        sizing.environment_cost(dev, PRICES, streaming_workers="most")


def test_more_shards_cost_more():
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    base = sizing.environment_cost(parse_config(raw).get("prod"), PRICES)
    bigger = update_raw(raw, "prod", "kinesis_streams", [
        {"name": "clickstream", "dataset": "clickstream", "capacity_mode": "provisioned", "shard_count": 16, "retention_hours": 168}])
    after = sizing.environment_cost(parse_config(bigger).get("prod"), PRICES)
    assert after["kinesis:clickstream"] - base["kinesis:clickstream"] == pytest.approx(8 * 730 * 0.015, abs=0.01)


def test_under_provisioned_environment_is_warned(capsys):
    code = sizing.main(["--events-per-second", "100000", "--record-kb", "1", "--latency-seconds", "60",
                        "--records-per-core-per-second", "10000", "--environment", "staging"])
    out = capsys.readouterr().out
    assert code == 1
    assert "WARNING staging.kinesis_streams[clickstream].shard_count: 2 < 130 needed" in out
    assert "WARNING staging.streaming.max_workers: 4 x G.1X gives 12 executor cores < 13 needed" in out
    assert "WARNING staging.streaming.window_size_seconds: 60 exceeds half the latency target (60 s)" in out


def test_a_shared_job_is_warned_by_its_own_block(capsys):
    """dev's sources run in its job "ingest" (2 x G.025X, 60 s): the warnings name that job's block, whose settings
    they are, not the environment's `streaming` (4 x G.025X), which no dev source runs with."""
    code = sizing.main(["--events-per-second", "2000", "--record-kb", "1", "--latency-seconds", "100",
                        "--records-per-core-per-second", "1000", "--environment", "dev"])
    out = capsys.readouterr().out
    assert code == 1
    assert "WARNING dev.streaming_jobs[0].streaming.max_workers: 2 x G.025X gives 2 executor cores < " in out
    assert "WARNING dev.streaming_jobs[0].streaming.window_size_seconds: 60 exceeds half the latency target (100 s)" in out
    assert "WARNING dev.streaming." not in out


def test_cli_json_output_is_pasteable(capsys):
    assert sizing.main(["--events-per-second", "1000", "--record-kb", "1", "--latency-seconds", "120",
                        "--records-per-core-per-second", "25000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kinesis_shards"] == 2 and data["worker_type"] == "G.025X"


def test_fragment_for_prod_keeps_to_the_worker_types_prod_allows(capsys):
    """Without an environment the smallest worker fits 1,000 events/s; prod's validation refuses G.025X, so
    for prod the same load gets G.1X, and the fragment, pasted into prod's config, passes validation."""
    args = ["--events-per-second", "1000", "--record-kb", "1", "--latency-seconds", "120",
            "--records-per-core-per-second", "25000", "--json"]
    sizing.main(args)
    assert json.loads(capsys.readouterr().out)["worker_type"] == "G.025X"
    sizing.main([*args, "--environment", "prod"])
    fragment = json.loads(capsys.readouterr().out)
    assert (fragment["worker_type"], fragment["max_workers"], fragment["cores_needed"]) == ("G.1X", 2, 1)
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    for field in ("worker_type", "max_workers"):
        raw = update_raw(raw, "prod", f"streaming.{field}", fragment[field])
    assert parse_config(raw).get("prod").streaming.worker_type == "G.1X"
    assert sizing.choose_workers(9, "4.0", ("G.1X", "G.2X")) == ("G.1X", 4)
    assert sizing.choose_workers(1, "5.0", ("G.2X",)) == ("G.2X", 2)


def _printed_fragment(text: str) -> dict:
    return json.loads(text[text.index("{", text.index("config fragment")):text.rindex("}") + 1])


def test_the_printed_fragment_pastes_into_the_environment_whole(capsys):
    """The text fragment names the stream, its dataset and retention, and with --environment it is the environment's
    whole kinesis_streams list (a list replaces the environment's): laid over dev's block it validates, keeps dev's other
    streams and sizes the named one. Without --stream the placeholders say which options fill them."""
    args = ["--events-per-second", "3000", "--record-kb", "1", "--latency-seconds", "120",
            "--records-per-core-per-second", "25000"]
    sizing.main(args)
    printed = capsys.readouterr().out
    assert "--stream and --dataset fill the placeholders" in printed
    assert _printed_fragment(printed)["kinesis_streams"][0]["name"] == "<stream name: --stream>"

    sizing.main([*args, "--environment", "dev", "--stream", "orders"])
    fragment = _printed_fragment(capsys.readouterr().out)
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    before = {s["name"]: s for s in raw["environments"]["dev"]["kinesis_streams"]}
    for key, value in fragment.items():
        raw["environments"]["dev"][key] = value if key == "kinesis_streams" else {**raw["environments"]["dev"].get(key, {}), **value}
    dev = parse_config(raw).get("dev")
    streams = {s.name: s for s in dev.kinesis_streams}
    assert set(streams) == set(before)  # nothing dropped
    sized = next(e for e in fragment["kinesis_streams"] if e["name"] == "orders")
    assert (streams["orders"].capacity_mode, streams["orders"].dataset) == ("provisioned", "orders")
    assert streams["orders"].shard_count == sized["shard_count"] >= 3
    assert streams["clickstream"].capacity_mode == before["clickstream"]["capacity_mode"]

    sizing.main([*args, "--stream", "sensors", "--dataset", "orders", "--retention-hours", "48"])
    (entry,) = _printed_fragment(capsys.readouterr().out)["kinesis_streams"]
    for bad, said in ((["--stream", "s", "--retention-hours", "12"], "24 to 8760 hours"),
                      (["--stream", "s", "--dataset", "sensor_readngs"], "is not a dataset"),
                      (["--dataset", "orders"], "give --stream too")):
        with pytest.raises(SystemExit) as refused:
            sizing.main([*args, *bad])
        assert refused.value.code == 2 and said in capsys.readouterr().err
    assert entry == {"name": "sensors", "dataset": "orders", "capacity_mode": "provisioned",
                     "shard_count": entry["shard_count"], "retention_hours": 48} and entry["shard_count"] >= 3


# Prices as cited in devtools/sizing.py, written out here so that a wrong constant fails: S3 PUT and LIST 0.005 and GET
# 0.0004 USD per 1,000, Glue Data Catalog 1.00 USD per million requests (https://aws.amazon.com/s3/pricing/,
# https://aws.amazon.com/lake-formation/pricing/).
PUT, GET, CATALOG = 0.005 / 1000, 0.0004 / 1000, 1.00 / 1e6


def test_what_an_iceberg_dataset_adds_in_dev_from_the_cited_prices():
    """dev carries orders on one Kinesis stream, a 60 s window: 60 commits an hour, 43,800 a month. Per commit: 3 PUTs
    (metadata.json, manifest list, manifest); GETs: 3 metadata.json (three table loads), 2 manifest lists around the
    commit, and the duplicate check's manifest list, 1 + 30 manifests and 1 + 30 data files x 2 GETs = 99; catalog
    requests: 3 loads + GetTable, GetTable, UpdateTable = 6. Maintenance, 730 hourly runs: 3 commits x 3 PUTs; 4 loads +
    3 x 2 manifest lists GET; 4 loads + 3 x 3 catalog requests; LIST over 168 h x 63 snapshots x 3 files + 100
    metadata.json + 8,760 hourly files = 40,612 objects, 41 LISTs; Glue time 0.95 x dev's compaction share (2 G.1X x
    5 min x 730 x 0.29 flex, split between its 4 datasets: clickstream, orders, and page_views and checkouts, routed)."""
    dev = load_config().get("dev")
    cost = sizing.iceberg_dataset_cost(dev, "orders", PRICES)
    commits = 730 * 3600 / 60
    assert cost.commits_per_month == {"orders": commits}
    assert cost.streaming["orders"] == sizing.IcebergRequests(
        s3_put=commits * 3, s3_get=commits * (3 + 2 + 1 + 31 + 31 * 2), glue_catalog=commits * 6)
    assert cost.table_objects == 168 * 63 * 3 + 100 + 8760
    assert cost.maintenance == sizing.IcebergRequests(s3_put=730 * 9, s3_get=730 * 10, s3_list=730 * 41, glue_catalog=730 * 13)
    commits_usd = commits * (3 * PUT + 99 * GET + 6 * CATALOG)
    compaction_share = 2 * 1 * (5 / 60) * 730 * 0.29 / 4
    maintenance_usd = 730 * (9 * PUT + 10 * GET + 41 * PUT + 13 * CATALOG)
    maintenance_glue_usd = compaction_share * (0.95 - 1)
    assert (commits_usd, maintenance_usd, maintenance_glue_usd) == (
        pytest.approx(2.654, abs=0.001), pytest.approx(0.195, abs=0.001), pytest.approx(-0.441, abs=0.001))
    with_orders = sizing.environment_cost(dev, PRICES, iceberg_datasets={"orders"})
    assert with_orders == {**sizing.environment_cost(dev, PRICES), "iceberg_commits:orders": round(commits_usd, 2),
                           "iceberg_maintenance:orders": round(maintenance_usd, 2),
                           "iceberg_maintenance_glue:orders": round(maintenance_glue_usd, 2)}
    # the environment's table_formats decide over dataset.json: Iceberg by config, or kept Parquet by it
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    by_config = parse_config(update_raw(raw, "dev", "table_formats", {"orders": "iceberg"})).get("dev")
    assert sizing.environment_cost(by_config, PRICES) == with_orders
    kept = parse_config(update_raw(raw, "dev", "table_formats", {"orders": "parquet"})).get("dev")
    assert sizing.environment_cost(kept, PRICES, iceberg_datasets={"orders"}) == sizing.environment_cost(dev, PRICES)
    # S3 Tables for the same table: 0.025 USD a month per 1,000 objects; 0.002 per 1,000 objects compacted
    assert cost.s3_tables_monitoring_usd == pytest.approx(40_612 * 0.025 / 1000)
    assert cost.s3_tables_compaction_objects_usd == pytest.approx(commits * 0.002 / 1000)


def test_iceberg_requests_follow_the_window_and_the_sources_of_the_dataset():
    """Half the window, twice the commits, and each batch's duplicate check finds twice the pending files; two Kafka
    partition groups are two sources committing to one table, whose hour each batch reads."""
    raw = json.loads(sizing.REPO_ROOT.joinpath("config/environments.json").read_text())
    # dev's orders runs in its job "ingest", whose own block sets the window: the environment's does not reach it
    env_window = parse_config(update_raw(raw, "dev", "streaming.window_size_seconds", 30)).get("dev")
    assert sizing.iceberg_dataset_cost(env_window, "orders", PRICES).commits_per_month["orders"] == 730 * 3600 / 60
    fast = parse_config(update_raw(raw, "dev", "streaming_jobs", [
        {"name": "ingest", "sources": ["clickstream", "orders", "events"],
         "streaming": {"max_workers": 2, "window_size_seconds": 30}}])).get("dev")
    cost = sizing.iceberg_dataset_cost(fast, "orders", PRICES)
    commits = 730 * 3600 / 30
    assert cost.streaming["orders"].s3_put == commits * 3
    assert cost.streaming["orders"].s3_get == commits * (3 + 2 + 1 + 61 + 61 * 2)
    grouped = parse_config(update_raw(raw, "staging", "msk.partition_groups", [[0, 1, 2], [3, 4, 5]])).get("staging")
    two = sizing.iceberg_dataset_cost(grouped, "orders", PRICES)
    assert sorted(two.streaming) == ["orders-p0", "orders-p1"]
    assert two.streaming["orders-p0"].s3_get == 43_800 * (3 + 2 + 1 + 61 + 61 * 2)
    assert two.table_objects == 168 * (120 + 3) * 3 + 100 + 8760
    # a dataset no source carries adds nothing to environment_cost, and is refused by name when asked for directly
    assert sizing.environment_cost(fast, PRICES, iceberg_datasets={"payments"}) == sizing.environment_cost(fast, PRICES)
    with pytest.raises(sizing.SizingError, match="no source carries dataset 'payments'"):
        sizing.iceberg_dataset_cost(fast, "payments", PRICES)


def test_cli_prints_what_iceberg_adds_in_prod(capsys):
    """prod: the same commits as dev (60 s window); its compaction runs on 4 G.1X at the standard rate (no Flex), so
    the maintenance's measured 0.95 saves more: 4 x 5/60 h x 730 x 0.44 / 2 datasets x 0.05 = 2.68."""
    assert sizing.main(["--iceberg", "orders", "--environment", "prod"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("prod: what Iceberg adds, USD a month (us-east-1; one commit per 60 s")
    assert "    commits of orders                    2.65\n" in out
    assert "      43,800 commits: 131,400 S3 PUT" in out and "4,336,200 S3 GET" in out and "262,800 Data Catalog" in out
    assert "    maintenance requests                 0.19\n" in out
    assert "    maintenance Glue time               -2.68\n" in out
    assert "measured on a 2-core machine, not on Glue: ESTIMATE" in out
    assert "monitoring 1.02 (~40,612 objects) + compaction 0.09 (43,800 files)" in out
    assert out.rstrip().endswith("total                                 +0.16")
    assert sizing.main(["--iceberg", "order"]) == 2
    assert "--iceberg: order is not a dataset (datasets: checkouts, clickstream, orders, page_views)" in capsys.readouterr().err
