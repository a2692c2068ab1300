"""Every configuration field, changed to another valid value: what the deploy would do with it.

Each field of the config (docs/configuration.md) is changed on its own in a base environment, the
environment is synthesized, and the template is compared with the base through `make diff`'s own
diff (devtools/diff.py, which labels a change as a replacement from the CloudFormation resource schemas'
create-only properties). A field whose change replaces or removes a resource that holds data, or
replaces a resource keeping its name (the deploy fails), must be listed in docs/infrastructure.md
"Config changes that replace resources" with what the replacement costs, and a field listed there
must really replace something. Adding a config field fails `test_every_field_is_exercised` until it
gets an alternative value here.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest

from devtools.diff import diff_templates
from devtools.snapshot import normalize, synth_templates
from infra import config as cfg
from infra.config import DEFAULT_CONFIG_PATH, parse_config

DOCS = DEFAULT_CONFIG_PATH.parent.parent / "docs" / "infrastructure.md"
DOCS_SECTION = "## Config changes that replace resources"

# The base environments: prod as configured, and prod on an existing VPC and MSK cluster (the fields that
# only exist in those modes are changed there).
EXISTING = {
    "account": "111122223333", "region": "eu-west-1",
    "network": {"mode": "existing", "vpc_id": "vpc-0a1b2c3d4e5f60718", "vpc_cidr": None,
                "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
                "private_subnet_ids": ["subnet-0aaa1111", "subnet-0bbb2222", "subnet-0ccc3333"]},
    "msk": {"mode": "existing", "bootstrap_servers": "b-1.lake.kafka.eu-west-1.amazonaws.com:9098",
            "cluster_arn": "arn:aws:kafka:eu-west-1:111122223333:cluster/lake/0a1b2c3d-1111-2222-3333-444455556666-2"},
}
PINNED = {"account": "111122223333", "region": "eu-west-1"}  # network.mode existing needs a region
BASES = {"prod": {}, "existing": EXISTING, "pinned": PINNED, "six-brokers": {"msk": {"broker_count": 6}}}

# field -> (base, {field or other path: new value}); the first key is the field under test.
ALTERNATIVES: dict[str, tuple[str, dict]] = {
    "removal_policy": ("staging", {"removal_policy": "retain"}),
    "tags": ("prod", {"tags": {"project": "streamlake", "environment": "prod", "team": "data"}}),
    "notification_emails": ("prod", {"notification_emails": ["data-platform-oncall@example.com", "lead@example.com"]}),
    "network.mode": ("pinned", {"network.mode": "existing", **{f"network.{k}": v for k, v in EXISTING["network"].items() if k != "mode"}}),
    "network.vpc_cidr": ("prod", {"network.vpc_cidr": "10.43.0.0/16"}),
    "network.max_azs": ("six-brokers", {"network.max_azs": 2}),
    "network.nat_gateways": ("prod", {"network.nat_gateways": 2}),
    "network.vpc_id": ("existing", {"network.vpc_id": "vpc-0f0e0d0c0b0a09080"}),
    "network.availability_zones": ("existing", {"network.availability_zones": ["eu-west-1b", "eu-west-1c", "eu-west-1a"]}),
    "network.private_subnet_ids": ("existing", {"network.private_subnet_ids": ["subnet-0ddd4444", "subnet-0bbb2222", "subnet-0ccc3333"]}),
    "storage.temp_expiration_days": ("prod", {"storage.temp_expiration_days": 3}),
    "storage.checkpoint_noncurrent_expiration_days": ("prod", {"storage.checkpoint_noncurrent_expiration_days": 14}),
    "storage.lake_noncurrent_expiration_days": ("prod", {"storage.lake_noncurrent_expiration_days": 60}),
    "storage.dead_letter_transition_days": ("prod", {"storage.dead_letter_transition_days": 60}),
    "storage.dead_letter_expiration_days": ("prod", {"storage.dead_letter_expiration_days": 730}),
    "storage.access_log_expiration_days": ("prod", {"storage.access_log_expiration_days": 180}),
    "storage.lake_infrequent_access_days": ("prod", {"storage.lake_infrequent_access_days": 180}),
    "kinesis_streams.name": ("prod", {"kinesis_streams.0.name": "clicks"}),
    "kinesis_streams.capacity_mode": ("prod", {"kinesis_streams.0.capacity_mode": "on_demand", "kinesis_streams.0.shard_count": None}),
    "kinesis_streams.shard_count": ("prod", {"kinesis_streams.0.shard_count": 16}),
    "kinesis_streams.retention_hours": ("prod", {"kinesis_streams.0.retention_hours": 336}),
    "kinesis_streams.dataset": ("prod", {"kinesis_streams.0.dataset": "orders"}),
    "msk.mode": ("prod", {"msk.mode": "serverless"}),
    "msk.source_name": ("prod", {"msk.source_name": "payments"}),
    "msk.dataset": ("prod", {"msk.dataset": "clickstream"}),
    "msk.datasets": ("prod", {"msk.dataset": None, "msk.datasets": ["orders", "page_views"]}),
    "msk.topic": ("prod", {"msk.topic": "orders-events-v2"}),
    "msk.topic_partitions": ("prod", {"msk.topic_partitions": 24}),
    "msk.kafka_version": ("prod", {"msk.kafka_version": "3.9.x"}),
    "msk.broker_instance_type": ("prod", {"msk.broker_instance_type": "kafka.m7g.xlarge"}),
    "msk.broker_count": ("prod", {"msk.broker_count": 6}),
    "msk.broker_volume_gb": ("prod", {"msk.broker_volume_gb": 1000}),
    "msk.broker_log_retention_days": ("prod", {"msk.broker_log_retention_days": 60}),
    "msk.bootstrap_servers": ("existing", {"msk.bootstrap_servers": "b-2.lake.kafka.eu-west-1.amazonaws.com:9098"}),
    "msk.cluster_arn": ("existing", {"msk.cluster_arn": "arn:aws:kafka:eu-west-1:111122223333:cluster/lake2/0a1b2c3d-1111-2222-3333-444455556666-2"}),
    "msk.topic_retention_hours": ("prod", {"msk.topic_retention_hours": 336}),
    "msk.topic_compression_type": ("prod", {"msk.topic_compression_type": "lz4"}),
    "msk.min_partitions": ("prod", {"msk.min_partitions": 48}),
    "msk.partition_groups": ("prod", {"msk.partition_groups": [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]}),
    "streaming.glue_version": ("prod", {"streaming.glue_version": "5.0"}),
    "streaming.worker_type": ("prod", {"streaming.worker_type": "G.2X"}),
    "streaming.max_workers": ("prod", {"streaming.max_workers": 20}),
    "streaming.window_size_seconds": ("prod", {"streaming.window_size_seconds": 30}),
    "streaming.batch_max_retries": ("prod", {"streaming.batch_max_retries": 5}),
    "streaming.kinesis_starting_position": ("prod", {"streaming.kinesis_starting_position": "LATEST"}),
    "streaming.kafka_starting_offsets": ("prod", {"streaming.kafka_starting_offsets": "latest"}),
    "streaming.max_fetch_records_per_shard": ("prod", {"streaming.max_fetch_records_per_shard": 50000}),
    "streaming.max_offsets_per_trigger": ("prod", {"streaming.max_offsets_per_trigger": 500000}),
    "streaming.maintenance_window": ("prod", {"streaming.maintenance_window": "SAT:02"}),
    "compaction.glue_version": ("prod", {"compaction.glue_version": "4.0"}),
    "compaction.worker_type": ("prod", {"compaction.worker_type": "G.2X"}),
    "compaction.workers": ("prod", {"compaction.workers": 8}),
    "compaction.flex": ("prod", {"compaction.flex": True}),
    "compaction.schedule": ("prod", {"compaction.schedule": "cron(20 * * * ? *)"}),
    "compaction.target_file_mb": ("prod", {"compaction.target_file_mb": 256}),
    "compaction.grace_minutes": ("prod", {"compaction.grace_minutes": 30}),
    "compaction.lookback_hours": ("prod", {"compaction.lookback_hours": 72}),
    "compaction.timeout_minutes": ("prod", {"compaction.timeout_minutes": 30}),
    "compaction.iceberg_snapshot_retention_hours": ("prod", {"compaction.iceberg_snapshot_retention_hours": 72}),
    "readers.bytes_scanned_cutoff_mb": ("prod", {"readers.bytes_scanned_cutoff_mb": 2048}),
    "readers.results_expiration_days": ("prod", {"readers.results_expiration_days": 30}),
    "lake_formation.enabled": ("prod", {"lake_formation.enabled": True}),
    "table_formats": ("prod", {"table_formats": {"orders": "iceberg"}}),
    # prod's Kinesis and Kafka sources in one job (its VPC reaches Kinesis through prod's NAT gateways)
    "streaming_jobs": ("prod", {"streaming_jobs": [{"name": "ingest", "sources": ["clickstream", "orders"]}]}),
    "alarms.iterator_age_ms": ("prod", {"alarms.iterator_age_ms": 240000}),
    "alarms.iterator_age_evaluation_periods": ("prod", {"alarms.iterator_age_evaluation_periods": 5}),
    "alarms.consumer_lag_ms": ("prod", {"alarms.consumer_lag_ms": 600000}),
    "alarms.batch_overrun_evaluation_periods": ("prod", {"alarms.batch_overrun_evaluation_periods": 5}),
    "alarms.no_records_minutes": ("prod", {"alarms.no_records_minutes": 30}),
    "alarms.dead_letter_percent": ("prod", {"alarms.dead_letter_percent": 2.5}),
    "alarms.msk_disk_used_percent": ("prod", {"alarms.msk_disk_used_percent": 70}),
    "alarms.compaction_missed_hours": ("prod", {"alarms.compaction_missed_hours": 6}),
    "alarms.freshness_minutes": ("prod", {"alarms.freshness_minutes": 90}),
    "alarms.no_data_minutes": ("prod", {"alarms.no_data_minutes": 120}),
}
# Fields not changed in place by design, with the reason.
NOT_CHANGES = {
    "account": "another account is another deployment target: deploy the environment there, not a change to this one",
    "region": "another region is another deployment target, like account",
    "lake_formation.iceberg_tables_created": "names Iceberg datasets and no shipped dataset is one; "
                                             "tests/infra/test_lake_formation.py switches orders to Iceberg and lists it",
    "kinesis_streams.route": "no shipped stream is routed (clickstream and orders declare no common route field); "
                             "tests/infra/test_routed_stream.py synthesizes dev with a routed stream of the example "
                             "datasets and shows a dataset joining its route in make diff: added, nothing replaced",
}


def _config_fields() -> set[str]:
    """Every field of an environment's config, from the config dataclasses (the source of truth)."""
    sections = {"network": cfg.NetworkConfig, "storage": cfg.StorageConfig, "kinesis_streams": cfg.KinesisStreamConfig,
                "msk": cfg.MskConfig, "streaming": cfg.StreamingJobConfig, "compaction": cfg.CompactionConfig,
                "alarms": cfg.AlarmConfig, "readers": cfg.ReadersConfig, "lake_formation": cfg.LakeFormationConfig}
    fields = set()
    for f in dataclasses.fields(cfg.EnvironmentConfig):
        if f.name in sections:
            fields |= {f"{f.name}.{g.name}" for g in dataclasses.fields(sections[f.name])}
        elif f.name != "name":
            fields.add(f.name)
    return fields


def _set(node: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if isinstance(node, list):
        node[int(keys[-1])] = value
    else:
        node[keys[-1]] = value


def _raw(base: str, changes: dict | None = None) -> dict:
    """The config document with environment `prod` (or staging) built from `base`, plus `changes`."""
    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    env = "staging" if base == "staging" else "prod"
    block = raw["environments"][env]
    merged = cfg._deep_merge(raw["defaults"], block)  # the full environment, so list fields can be edited by index
    for section, override in BASES.get(base, {}).items():
        merged[section] = cfg._deep_merge(merged.get(section), override) if isinstance(override, dict) else override
    for dotted, value in (changes or {}).items():
        _set(merged, dotted, copy.deepcopy(value))
    raw["environments"] = {env: merged}
    return raw


_BASE_TEMPLATES: dict[str, dict] = {}


def _synth(raw: dict) -> dict:
    config = parse_config(raw)
    (env,) = config.environments
    return normalize(synth_templates([env], config=config)[env])


def _base_template(base: str) -> dict:
    if base not in _BASE_TEMPLATES:
        _BASE_TEMPLATES[base] = _synth(_raw(base))
    return _BASE_TEMPLATES[base]


def _documented() -> dict[str, str]:
    """{field: the docs row} of docs/infrastructure.md's table of replacing config changes."""
    text = DOCS.read_text(encoding="utf-8")
    assert DOCS_SECTION in text, f"docs/infrastructure.md has no '{DOCS_SECTION}' section"
    section = text.split(DOCS_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([a-z_.]+)` \|(.*)$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_every_field_is_exercised():
    assert _config_fields() == set(ALTERNATIVES) | set(NOT_CHANGES)


def test_the_configuration_page_names_every_field():
    page = (DEFAULT_CONFIG_PATH.parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = page.split("| section |", 1)[1].split("\n## ", 1)[0]
    missing = [f for f in sorted(_config_fields()) if f"`{f.split('.')[-1]}`" not in table]
    assert missing == []


def test_documented_fields_exist():
    assert set(_documented()) <= set(ALTERNATIVES)


@pytest.mark.e2e
@pytest.mark.parametrize("field", sorted(ALTERNATIVES))
def test_a_replacing_change_is_documented_with_its_cost(field):
    base, changes = ALTERNATIVES[field]
    changed = _synth(_raw(base, changes))
    diff = diff_templates(_base_template(base), changed)
    assert diff, f"changing {field} changed no template: the test's alternative value is not a change"
    # what a reviewer must be told: a replacement that cannot deploy, or one that loses data
    replacing = [c for c in diff if c.deploy_fails or c.data_loss]
    failing = [c for c in diff if c.deploy_fails]
    documented = _documented()
    found = ", ".join(f"{c.logical_id} ({c.type}, {c.kind}{', deploy fails' if c.deploy_fails else ''})" for c in replacing)
    if not replacing:
        assert field not in documented, f"docs list {field} as replacing, but changing it replaces nothing"
        return
    assert field in documented, f"changing {field} replaces or removes {found}: list it in docs/infrastructure.md"
    if failing:
        assert "deploy fails" in documented[field], f"{field}: the docs row must say the deploy fails ({found})"


@pytest.mark.e2e
def test_a_new_kafka_version_replaces_the_broker_configuration_under_a_new_name():
    """AWS::MSK::Configuration's KafkaVersionsList and Name are create-only: the replacement deploys because
    the configuration's name carries the version; the cluster is upgraded in place."""
    base, changes = ALTERNATIVES["msk.kafka_version"]
    diff = {c.logical_id: c for c in diff_templates(_base_template(base), _synth(_raw(base, changes)))}
    (configuration,) = [c for c in diff.values() if c.type == "AWS::MSK::Configuration"]
    assert configuration.kind == "replaced" and not configuration.deploy_fails
    (cluster,) = [c for c in diff.values() if c.type == "AWS::MSK::Cluster"]
    assert cluster.kind == "modified"
