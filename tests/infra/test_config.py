"""Environment configuration: the shipped file is valid and every bad value is named precisely."""

from __future__ import annotations

import json

import pytest

from infra.config import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    load_config,
    parse_config,
    schedule_interval_minutes,
    update_raw,
)


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(DEFAULT_CONFIG_PATH.read_text())


def test_shipped_config_declares_dev_staging_prod_with_defaults_merged():
    config = load_config()
    assert list(config.environments) == ["dev", "staging", "prod"]
    dev, prod = config.get("dev"), config.get("prod")
    assert (dev.streaming.worker_type, prod.streaming.worker_type) == ("G.025X", "G.1X")
    assert (dev.removal_policy, prod.removal_policy) == ("destroy", "retain")
    # prod overrides one key of streaming; the rest comes from defaults
    assert prod.streaming.window_size_seconds == dev.streaming.window_size_seconds == 60
    assert prod.kinesis_streams[0].shard_count == 8 and dev.kinesis_streams[0].capacity_mode == "on_demand"
    # orders as JSON on Kinesis in dev, beside the routed stream events (page_views and checkouts, routed by `kind`)
    assert dev.source_names == ("clickstream", "orders", "events")
    assert prod.source_names == ("clickstream", "orders")  # orders as Avro on MSK in staging and prod
    assert prod.carried == {"clickstream": ("clickstream",), "orders": ("orders",)}
    assert dev.carried == {**prod.carried, "events": ("checkouts", "page_views")}


def _problems(raw: dict, env: str, dotted: str, value) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(update_raw(raw, env, dotted, value))
    return info.value.problems


BAD_VALUES = [
    ("prod", "streaming.worker_type", "G.3X", "prod.streaming.worker_type: 'G.3X' is not one of G.025X, G.1X, G.2X"),
    ("dev", "streaming.glue_version", "3.0", "dev.streaming.glue_version: '3.0' is not one of 4.0, 5.0"),
    ("dev", "streaming.max_workers", 1, "dev.streaming.max_workers: 1 is out of range: allowed 2 to 299"),
    ("dev", "streaming.max_workers", "4", "dev.streaming.max_workers: '4' must be a whole number from 2 to 299"),
    ("staging", "streaming.window_size_seconds", 4.5, "staging.streaming.window_size_seconds: 4.5 must be a whole number from 1 to 3600"),
    ("dev", "compaction.worker_type", "G.025X", "dev.compaction.worker_type: 'G.025X' is not one of G.1X, G.2X"),
    ("dev", "compaction.flex", "yes", "dev.compaction.flex: 'yes' must be true or false"),
    ("dev", "compaction.timeout_minutes", 50, "dev.compaction.timeout_minutes: 50 is too long for a run every 60 minutes: a Flex run may wait 20 minutes to start, so the timeout must be at most 35"),
    ("prod", "compaction.timeout_minutes", 41, "prod.compaction.timeout_minutes: 41 is too long for a run every 60 minutes: a Standard run may wait 15 minutes to start, so the timeout must be at most 40"),
    ("dev", "compaction.schedule", "cron(15 8 * * ? *)", "dev.compaction.schedule: 'cron(15 8 * * ? *)' is not a supported shape"),
    ("dev", "compaction.schedule", "rate(1 hour)", "dev.compaction.schedule: 'rate(1 hour)' is not an EventBridge/Glue cron expression"),
    ("prod", "removal_policy", "destroy", "prod.removal_policy: 'destroy' is not allowed in prod"),
    ("staging", "msk.dataset", "payments", "staging.msk.dataset: 'payments' is not one of checkouts, clickstream, orders, page_views"),
    ("dev", "removal_policy", "keep", "dev.removal_policy: 'keep' is not one of retain, destroy"),
    ("dev", "msk.mode", "cluster", "dev.msk.mode: 'cluster' is not one of none, provisioned, serverless, existing"),
    ("dev", "msk.mode", "existing", "dev.msk.bootstrap_servers: null is required when mode is 'existing'"),
    ("dev", "msk.broker_instance_type", "express.m7g.large", "dev.msk.broker_instance_type: 'express.m7g.large' is not a Standard MSK broker type"),
    ("dev", "msk.kafka_version", "2.8.1", "dev.msk.kafka_version: '2.8.1' is not one of"),
    ("dev", "msk.kafka_version", "3.6.0", "dev.msk.kafka_version: '3.6.0' is not one of 3.7.x, 3.8.x, 3.9.x"),
    ("dev", "msk.broker_log_retention_days", 10, "dev.msk.broker_log_retention_days: 10 is not a CloudWatch Logs retention: one of 1, 3, 5"),
    ("dev", "msk.broker_log_retention_days", 0, "dev.msk.broker_log_retention_days: 0 is out of range: allowed 1 to 3653"),
    ("dev", "notification_emails", ["oncall"], "dev.notification_emails[0]: 'oncall' is not an email address"),
    ("dev", "account", "12345", "dev.account: '12345' is not a 12-digit AWS account id"),
    ("dev", "region", "eu-west-1", "dev.account: null must be set when region is set"),
    ("dev", "network.mode", "existing", "dev.network.vpc_id: null is required when mode is 'existing'"),
    ("dev", "network.mode", "existing", "dev.network.mode: 'existing' names a VPC no job would use: only the MSK job runs in a VPC"),
    ("dev", "network.vpc_cidr", "10.0.0.0/8", "dev.network.vpc_cidr: '10.0.0.0/8' is not an IPv4 CIDR from /16 to /28"),
    ("dev", "streaming.window_sise_seconds", 30, "dev.streaming.window_sise_seconds: unknown field; allowed:"),
    ("dev", "alarms.iterator_age_ms", 50_000_000, "dev.alarms.iterator_age_ms: 50000000 must be under half of stream 'clickstream' retention"),
    ("dev", "alarms.dead_letter_percent", 0, "dev.alarms.dead_letter_percent: 0 is out of range: allowed 0.01 to 100"),
    ("dev", "streaming.maintenance_window", "Sunday 3am", "dev.streaming.maintenance_window: 'Sunday 3am' is not a window like 'SUN:02'"),
    ("prod", "streaming.worker_type", "G.025X", "prod.streaming.worker_type: 'G.025X' is for low-volume streams; prod must use G.1X or G.2X"),
    ("dev", "storage.dead_letter_expiration_days", 30, "dev.storage.dead_letter_expiration_days: 30 is out of range: allowed 31 to 3650"),
    ("prod", "storage.lake_infrequent_access_days", 29, "prod.storage.lake_infrequent_access_days: 29 is out of range: allowed 30 to 3650"),
    ("dev", "tags", {"project": 7}, "dev.tags: {\"project\": 7} must map tag keys"),
    ("prod", "msk.topic_compression_type", "brotli", "prod.msk.topic_compression_type: 'brotli' is not one of zstd, lz4, snappy, gzip, uncompressed, producer"),
    ("prod", "msk.topic_retention_hours", -1, "prod.msk.topic_retention_hours: -1 is out of range: allowed 1 to 87600"),
    ("prod", "alarms.consumer_lag_ms", 400_000_000, "prod.alarms.consumer_lag_ms: 400000000 must be under half of the topic's retention (msk.topic_retention_hours 168 h = 604800000 ms)"),
    ("prod", "msk.min_partitions", 0, 'prod.msk.min_partitions: 0 must be "auto", null or an integer in 1..10000'),
    ("prod", "msk.min_partitions", "many", 'prod.msk.min_partitions: \'many\' must be "auto", null or an integer in 1..10000'),
    ("prod", "msk.partition_groups", [[0, 1]], "prod.msk.partition_groups: [[0, 1]] must be null or a list of at least 2 non-empty lists"),
    ("prod", "msk.partition_groups", [list(range(6)), [5, 6, 7, 8, 9, 10, 12]],
     "prod.msk.partition_groups: [[0, 1, 2, 3, 4, 5], [5, 6, 7, 8, 9, 10, 12]] names partitions [12] outside 0..11"),
    ("prod", "msk.partition_groups", [list(range(6)), [5, 6, 7, 8, 9, 10, 11]],
     "prod.msk.partition_groups: [[0, 1, 2, 3, 4, 5], [5, 6, 7, 8, 9, 10, 11]] names partitions [5] in more than one group"),
    ("prod", "msk.partition_groups", [list(range(6)), [6, 7, 8]],
     "prod.msk.partition_groups: [[0, 1, 2, 3, 4, 5], [6, 7, 8]] leaves partitions [9, 10, 11] to no job"),
]


@pytest.mark.parametrize("env,dotted,value,expected", BAD_VALUES, ids=[f"{e}.{d}={v!r}" for e, d, v, _ in BAD_VALUES])
def test_bad_value_is_reported_with_environment_field_value_and_what_is_allowed(raw, env, dotted, value, expected):
    problems = _problems(raw, env, dotted, value)
    assert any(p.startswith(expected) for p in problems), problems


def test_partition_groups_make_one_kafka_source_per_group_with_its_partitions_and_min_partitions(raw):
    """Each group is a source (its own job, checkpoint and dead letters) reading its partitions; "auto" asks for one
    Spark partition per executor core (prod: 10 G.1X workers, 9 executors x 4 vCPUs) when the job reads fewer."""
    prod = parse_config(update_raw(raw, "prod", "msk.partition_groups", [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11]])).get("prod")
    assert prod.source_names == ("clickstream", "orders-p0", "orders-p1")
    assert prod.carried == {"clickstream": ("clickstream",), "orders-p0": ("orders",), "orders-p1": ("orders",)}
    assert [prod.msk.partitions_of(s) for s in prod.msk.source_names] == [(0, 1, 2, 3), (4, 5, 6, 7, 8, 9, 10, 11)]
    assert [prod.msk.min_partitions_for(s, "G.1X", 10) for s in prod.msk.source_names] == [36, 36]
    assert prod.msk.min_partitions_for("orders-p0", "G.1X", 2) is None  # 4 cores, 4 partitions: nothing to raise
    fixed = parse_config(update_raw(raw, "prod", "msk.min_partitions", 48)).get("prod")
    assert fixed.source_names == ("clickstream", "orders") and fixed.msk.min_partitions_for("orders", "G.1X", 10) == 48
    off = parse_config(update_raw(raw, "prod", "msk.min_partitions", None)).get("prod")
    assert off.msk.min_partitions_for("orders", "G.1X", 10) is None


def test_kinesis_stream_rules(raw):
    streams = [
        {"name": "clicks", "dataset": "clickstream", "capacity_mode": "provisioned", "shard_count": None, "retention_hours": 24},
        {"name": "clicks", "dataset": "clickstream", "capacity_mode": "on_demand", "shard_count": 3, "retention_hours": 12},
    ]
    problems = _problems(raw, "staging", "kinesis_streams", streams)
    assert problems == [
        "staging.kinesis_streams[0].shard_count: null is required when capacity_mode is 'provisioned'",
        "staging.kinesis_streams[1].retention_hours: 12 is out of range: allowed 24 to 8760",
        "staging.kinesis_streams[1].shard_count: 3 must be null when capacity_mode is 'on_demand'",
        "staging.kinesis_streams: 'clicks' is used as a stream name more than once",
    ]


def test_no_source_at_all_is_refused(raw):
    problems = _problems(raw, "dev", "kinesis_streams", [])
    assert problems == ["dev.kinesis_streams: [] leaves no source: configure a Kinesis stream or set msk.mode"]


def test_every_problem_is_reported_at_once(raw):
    doc = update_raw(update_raw(raw, "prod", "streaming.worker_type", "G.3X"), "staging", "compaction.workers", 0)
    with pytest.raises(ConfigError) as info:
        parse_config(doc, "config/environments.json")
    message = str(info.value)
    assert message.splitlines() == [
        "invalid environment configuration in config/environments.json (2 problem(s)):",
        "  staging.compaction.workers: 0 is out of range: allowed 2 to 299",
        "  prod.streaming.worker_type: 'G.3X' is not one of G.025X, G.1X, G.2X",
    ]


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read .*missing.json"):
        load_config(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"project": "x",\n  "environments": }')
    with pytest.raises(ConfigError, match="not valid JSON at line 2 column 19"):
        load_config(broken)


def test_existing_network_and_msk_accept_complete_settings(raw):
    doc = update_raw(raw, "staging", "network", {
        "mode": "existing", "vpc_id": "vpc-0abc12345", "vpc_cidr": None,
        "availability_zones": ["eu-west-1a", "eu-west-1b"],
        "private_subnet_ids": ["subnet-0aaa1111", "subnet-0bbb2222"],
    })
    doc = update_raw(doc, "staging", "account", "123456789012")
    doc = update_raw(doc, "staging", "region", "eu-west-1")
    doc = update_raw(doc, "staging", "msk", {
        "mode": "existing", "bootstrap_servers": "b-1.x.kafka.eu-west-1.amazonaws.com:9098",
        "cluster_arn": "arn:aws:kafka:eu-west-1:123456789012:cluster/lake/0a1b2c3d-1111-2222-3333-444455556666-2",
    })
    env = parse_config(doc).get("staging")
    assert env.network.private_subnet_ids == ("subnet-0aaa1111", "subnet-0bbb2222")
    assert env.msk.mode == "existing" and env.msk.enabled


def test_unknown_environment_selection_is_an_error():
    with pytest.raises(ConfigError, match="qa: unknown environment; configured: dev, staging, prod"):
        load_config().get("qa")


@pytest.mark.parametrize("schedule,minutes", [
    ("cron(15 * * * ? *)", 60), ("cron(0 */2 * * ? *)", 120), ("cron(5 0/3 * * ? *)", 180),
    ("cron(15 */5 * * ? *)", None), ("cron(75 * * * ? *)", None), ("cron(15 * * * MON *)", None),
])
def test_schedule_interval_of_the_supported_shapes(schedule, minutes):
    assert schedule_interval_minutes(schedule) == minutes


def test_a_longer_interval_allows_a_longer_timeout(raw):
    doc = update_raw(raw, "dev", "compaction.schedule", "cron(15 */2 * * ? *)")
    doc = update_raw(doc, "dev", "compaction.timeout_minutes", 95)
    assert parse_config(doc).get("dev").compaction.timeout_minutes == 95


def test_glue_versions_per_job_kind_and_the_refusal_message(raw, monkeypatch):
    """Every documented version whose Spark line make test runs is allowed; one AWS documents no streaming
    for, or whose Spark line is not tested here, is refused with the reason (infra/runtimes.py)."""
    import dataclasses as dc

    from infra import runtimes
    from infra.config import rules as config_module  # where the Glue version rule looks the tables up

    assert runtimes.STREAMING_GLUE_VERSIONS == ("4.0", "5.0", "5.1", "6.0")
    assert runtimes.BATCH_GLUE_VERSIONS == ("4.0", "5.0", "5.1", "6.0")
    assert [v for v, r in runtimes.RUNTIMES.items() if not r.rehearsable] == ["6.0"]  # awsglue 6.0 needs Python 3.13
    no_streaming = {**runtimes.RUNTIMES, "5.1": dc.replace(runtimes.RUNTIMES["5.1"], streaming=False)}
    monkeypatch.setattr(config_module, "RUNTIMES", no_streaming)
    monkeypatch.setattr(config_module, "STREAMING_GLUE_VERSIONS", ("4.0", "5.0", "6.0"))
    monkeypatch.setattr(config_module, "BATCH_GLUE_VERSIONS", ("4.0", "5.0", "5.1"))
    monkeypatch.setattr(config_module, "LOCAL_SPARK_LINES", {"3.3": "a.txt", "3.5": "b.txt"})
    doc = update_raw(raw, "dev", "streaming.glue_version", "5.1")
    doc = update_raw(doc, "dev", "compaction.glue_version", "6.0")
    with pytest.raises(ConfigError) as refused:
        parse_config(doc)
    assert ("dev.streaming.glue_version: '5.1' is not allowed for streaming (gluestreaming) jobs: AWS documents no "
            "streaming jobs on it (allowed: 4.0, 5.0, 6.0; infra/runtimes.py lists each version with its citations)") in str(refused.value)
    assert ("dev.compaction.glue_version: '6.0' is not allowed for batch (glueetl) jobs: its Spark line 4.1 is not among "
            "the lines make test runs the job code on") in str(refused.value)


@pytest.mark.parametrize("records,window,expected", [
    (100_000, 60, 2_000),   # 10 GetRecords calls at 5 per second per shard
    (1_000, 60, 1_000),     # never below Glue's default
    (10_000_000, 60, 30_000),  # at most half the window
    (100_000, 2, 1_000),    # a 2 s window: half is 1 s, Glue's default still holds
])
def test_kinesis_fetch_time_is_sized_with_the_record_limit(raw, records, window, expected):
    env = parse_config(update_raw(update_raw(raw, "prod", "streaming.max_fetch_records_per_shard", records),
                                  "prod", "streaming.window_size_seconds", window)).get("prod")
    assert env.streaming.max_fetch_time_ms == expected


def test_a_defaults_list_every_environment_replaces_is_named_at_synth(capsys):
    """Lists replace in the deep merge: a stream bound only in `defaults` reaches no environment that declares its own
    streams, and synth says so instead of deploying without it (the shipped config has no such entry)."""
    from infra.config.loader import parse_config

    raw = json.loads(DEFAULT_CONFIG_PATH.read_text())
    parse_config(raw, "config/environments.json")
    assert "reaches no environment" not in capsys.readouterr().err

    raw["defaults"]["kinesis_streams"] = [{"name": "sensors", "dataset": "clickstream", "capacity_mode": "on_demand",
                                           "shard_count": None, "retention_hours": 24}]
    config = parse_config(raw, "config/environments.json")
    err = capsys.readouterr().err
    assert "defaults.kinesis_streams (1 entries) reaches no environment" in err and "lists do not merge" in err
    assert all("sensors" not in [s.name for s in env.kinesis_streams] for env in config.environments.values())

    del raw["environments"]["dev"]["kinesis_streams"]  # dev now takes the defaults' list: no warning
    del raw["environments"]["dev"]["streaming_jobs"]  # (its shared job ran the sources dev no longer has)
    config = parse_config(raw, "config/environments.json")
    assert "reaches no environment" not in capsys.readouterr().err
    assert [s.name for s in config.environments["dev"].kinesis_streams] == ["sensors"]


def test_streaming_jobs_group_sources_with_their_own_sizing_and_name_every_wrong_key(raw):
    """`streaming_jobs`: a job runs the sources it names, sized by the environment's `streaming` with its own over it;
    a source no job names keeps a job of its own, named after it, with the environment's settings."""
    shared = [{"name": "small", "sources": ["clickstream"], "streaming": {"max_workers": 2, "window_size_seconds": 30}}]
    dev = parse_config(update_raw(raw, "dev", "streaming_jobs", shared)).get("dev")
    small, orders, events = dev.job_groups
    assert (small.name, small.sources, small.declared, orders.name, orders.sources, orders.declared) == (
        "small", ("clickstream",), True, "orders", ("orders",), False)
    assert (events.name, events.sources, events.declared) == ("events", ("events",), False)  # dev's routed stream
    assert (small.settings.max_workers, small.settings.window_size_seconds, small.settings.worker_type) == (2, 30, "G.025X")
    assert orders.settings == dev.streaming and dev.job_of("orders") == orders
    assert events.settings == dev.streaming and dev.job_of("events") == events
    both = parse_config(update_raw(raw, "dev", "streaming_jobs", [{"name": "orders", "sources": ["clickstream", "orders"]}])).get("dev")
    assert [(g.name, g.sources) for g in both.job_groups] == [("orders", ("clickstream", "orders")), ("events", ("events",))]

    refused = {
        "dev.streaming_jobs[1].sources: 'clickstream' is also in job 'ja'": [
            {"name": "ja", "sources": ["clickstream"]}, {"name": "jb", "sources": ["clickstream"]}],
        "dev.streaming_jobs[0].sources: [] must hold at least 1 item(s)": [{"name": "ja", "sources": []}],
        "dev.streaming_jobs[0].sources: 'payments' is no source of this environment (sources: clickstream, orders, events)": [
            {"name": "ja", "sources": ["payments"]}],
        "dev.streaming_jobs[0].name: 'orders' is the name of source 'orders', which this job does not run": [
            {"name": "orders", "sources": ["clickstream"]}],
        "dev.streaming_jobs[1].name: 'ja' names more than one job": [
            {"name": "ja", "sources": ["clickstream"]}, {"name": "ja", "sources": ["orders"]}],
        "dev.streaming_jobs[0].streaming.max_workers: 1 is out of range: allowed 2 to 299": [
            {"name": "ja", "sources": ["clickstream"], "streaming": {"max_workers": 1}}],
        "dev.streaming_jobs[0].streaming.glue_version: '3.0' is not one of": [
            {"name": "ja", "sources": ["clickstream"], "streaming": {"glue_version": "3.0"}}],
        "dev.streaming_jobs[0].streaming.window_sise_seconds: unknown field": [
            {"name": "ja", "sources": ["clickstream"], "streaming": {"window_sise_seconds": 30}}],
        "dev.streaming_jobs[0].streaming.window_size_seconds: 600 is more than half of alarms.no_records_minutes (15)": [
            {"name": "ja", "sources": ["clickstream"], "streaming": {"window_size_seconds": 600}}],
        "dev.streaming_jobs[0].topics: unknown field": [{"name": "ja", "sources": ["clickstream"], "topics": []}],
    }
    for expected, jobs in refused.items():
        problems = _problems(raw, "dev", "streaming_jobs", jobs)
        assert any(p.startswith(expected) for p in problems), (expected, problems)
    # an inherited bad value is reported once, under `streaming`, not again under each job
    bad = update_raw(update_raw(raw, "dev", "streaming.max_workers", 1), "dev", "streaming_jobs",
                     [{"name": "ja", "sources": ["clickstream"]}])
    with pytest.raises(ConfigError) as info:
        parse_config(bad)
    assert [p for p in info.value.problems if "max_workers" in p] == ["dev.streaming.max_workers: 1 is out of range: allowed 2 to 299"]
    prod = _problems(raw, "prod", "streaming_jobs", [{"name": "ja", "sources": ["clickstream"], "streaming": {"worker_type": "G.025X"}}])
    assert any(p.startswith("prod.streaming_jobs[0].streaming.worker_type: 'G.025X' is for low-volume streams") for p in prod), prod
    mixed = update_raw(update_raw(raw, "prod", "network.nat_gateways", 0), "prod", "streaming_jobs",
                       [{"name": "both", "sources": ["clickstream", "orders"]}])
    with pytest.raises(ConfigError) as info:
        parse_config(mixed)
    assert any("prod.streaming_jobs[0].sources: Kafka source(s) ['orders'] put the job in the VPC, and "
               "network.nat_gateways 0 leaves its Kinesis source(s) ['clickstream'] unreachable" in p for p in info.value.problems)
