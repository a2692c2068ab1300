"""Streaming and compaction Glue jobs: runtime, workers, arguments, security, least-privilege roles."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_glue as glue
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from devtools.template_sources import source_arguments
from glue_jobs import datasets
from infra.compaction_job import CompactionJob
from infra.config import load_config
from infra.glue_security import GlueJobSecurity
from infra.streaming_job import CatalogNames, JobSource, KafkaSource, LakeLocations, StreamingJob


def _stack(env_name: str):
    env = load_config().get(env_name)
    stack = cdk.Stack(cdk.App(), "Jobs", env=cdk.Environment(account="111122223333", region="eu-west-1"))
    key = kms.Key(stack, "DataKey")
    buckets = {name: s3.Bucket(stack, name, encryption_key=key) for name in ("Lake", "Dead", "Temp")}
    locations = LakeLocations(buckets["Lake"], "events", buckets["Dead"], "dead_letters", buckets["Temp"], "checkpoints")
    security = GlueJobSecurity(stack, "Security", environment="test", data_key=key, removal_policy=cdk.RemovalPolicy.DESTROY)
    stream = kinesis.Stream(stack, "Clicks", encryption=kinesis.StreamEncryption.KMS, encryption_key=key)
    StreamingJob(stack, "ClickJob", environment=env_name, name="clickstream", settings=env.streaming, security=security,
                 sources=[JobSource("clickstream", datasets.load("clickstream"), locations,
                                    CatalogNames("lake_db", "src_clickstream", "events"), stream=stream)])
    connections = (glue.Connection.from_connection_name(stack, "Conn", "msk-conn"),
                   glue.Connection.from_connection_name(stack, "NetB", "net-b"))
    kafka = KafkaSource(cluster_arn="arn:aws:kafka:eu-west-1:111122223333:cluster/lake/abc-1", bootstrap_servers="b-1.lake:9098",
                        topic="orders-events", connections=connections,
                        registry_arn="arn:aws:glue:eu-west-1:111122223333:registry/lake",
                        schema_arns=("arn:aws:glue:eu-west-1:111122223333:schema/lake/event",), registry_name="lake",
                        schema_name="event", connection_subnet_ids=("subnet-0a1", "subnet-0b1"),
                        connection_security_group_ids=("sg-0b2",), connection_vpc_id="vpc-0c3")
    StreamingJob(stack, "OrderJob", environment=env_name, name="orders", settings=env.streaming, security=security,
                 sources=[JobSource("orders", datasets.load("clickstream"), locations,
                                    CatalogNames("lake_db", "src_orders", "events"), kafka=kafka)])
    CompactionJob(stack, "Compaction", environment=env_name, settings=env.compaction, lake_bucket=buckets["Lake"],
                  lake_prefixes={"clickstream": "events"}, temp_bucket=buckets["Temp"], security=security)
    return assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def dev():
    return _stack("dev")


@pytest.fixture(scope="module")
def prod():
    return _stack("prod")


def _jobs(template) -> dict[str, dict]:
    return {k: v["Properties"] for k, v in template.find_resources("AWS::Glue::Job").items()}


def _job(template, prefix: str) -> dict:
    (props,) = [p for k, p in _jobs(template).items() if k.startswith(prefix)]
    return props


def test_streaming_jobs_runtime_workers_and_autoscaling(dev, prod):
    for template, worker, workers in ((dev, "G.025X", 4), (prod, "G.1X", 10)):
        job = _job(template, "ClickJob")
        assert job["Command"]["Name"] == "gluestreaming"
        assert (job["GlueVersion"], job["WorkerType"], job["NumberOfWorkers"]) == ("4.0", worker, workers)
        assert job["DefaultArguments"]["--enable-auto-scaling"] == "true"
        assert job["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
        assert "SecurityConfiguration" in job
        # Glue reads --enable-metrics by presence; the others take "true".
        assert "--enable-metrics" in job["DefaultArguments"]
        for flag in ("--enable-observability-metrics", "--enable-continuous-cloudwatch-log"):
            assert job["DefaultArguments"][flag] == "true", flag
    assert _job(prod, "ClickJob")["MaintenanceWindow"] == "Sun:3"
    assert "MaintenanceWindow" not in _job(dev, "ClickJob")


def test_each_job_has_its_own_checkpoint_and_dead_letter_prefix(dev):
    (click,) = source_arguments(_job(dev, "ClickJob")["DefaultArguments"])
    (orders,) = source_arguments(_job(dev, "OrderJob")["DefaultArguments"])
    assert json.dumps(click["--checkpoint_path"]).count("checkpoints/clickstream/") == 1
    assert json.dumps(orders["--checkpoint_path"]).count("checkpoints/orders/") == 1
    assert json.dumps(orders["--dead_letter_path"]).endswith('/dead_letters/orders"]]}')
    assert (click["--source_type"], orders["--source_type"]) == ("kinesis", "kafka")
    assert click["--max_fetch_records_per_shard"] == "100000" and "--max_offsets_per_trigger" not in click
    assert click["--max_fetch_time_ms"] == "2000" and "--max_fetch_time_ms" not in orders  # 10 GetRecords at 5/s
    assert orders["--max_offsets_per_trigger"] == "1000000" and orders["--starting_position"] == "earliest"
    assert (orders["--partitions"], orders["--min_partitions"]) == ("all", "none")  # subscribe; Spark's own split
    assert "--source_table" not in orders and click["--source_table"]  # the Kafka job reads the topic, no table


def test_kafka_job_lists_its_connections_in_failover_order(dev):
    assert _job(dev, "OrderJob")["Connections"] == {"Connections": ["msk-conn", "net-b"]}
    assert "Connections" not in _job(dev, "ClickJob")


def test_compaction_job_flex_outside_prod_hourly_one_at_a_time(dev, prod):
    d, p = _job(dev, "Compaction"), _job(prod, "Compaction")
    assert d["Command"]["Name"] == p["Command"]["Name"] == "glueetl"
    assert (d.get("ExecutionClass"), p.get("ExecutionClass", "STANDARD")) == ("FLEX", "STANDARD")
    assert (d["GlueVersion"], d["WorkerType"], d["NumberOfWorkers"], d["Timeout"]) == ("5.1", "G.1X", 2, 35)
    assert d["ExecutionProperty"] == {"MaxConcurrentRuns": 1} and d["MaxRetries"] == 0
    assert d["DefaultArguments"]["--target_file_mb"] == "128"
    dev.has_resource_properties("AWS::Glue::Trigger", {
        "Type": "SCHEDULED", "Schedule": "cron(15 * * * ? *)", "StartOnCreation": True,
        "Actions": [{"JobName": {"Ref": assertions.Match.string_like_regexp("CompactionJob")}}]})


def test_security_configuration_encrypts_s3_logs_and_bookmarks_with_kms(dev):
    (config,) = dev.find_resources("AWS::Glue::SecurityConfiguration").values()
    enc = config["Properties"]["EncryptionConfiguration"]
    assert enc["S3Encryptions"][0]["S3EncryptionMode"] == "SSE-KMS"
    assert enc["CloudWatchEncryption"]["CloudWatchEncryptionMode"] == "SSE-KMS"
    assert enc["JobBookmarksEncryption"]["JobBookmarksEncryptionMode"] == "CSE-KMS"


def _statements(template, role_prefix: str) -> list[dict]:
    roles = [k for k in template.find_resources("AWS::IAM::Role") if k.startswith(role_prefix)]
    assert len(roles) == 1
    out = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": roles[0]} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def _actions(statement) -> set[str]:
    a = statement["Action"]
    return {a} if isinstance(a, str) else set(a)


def test_streaming_roles_are_scoped_to_their_own_source_and_prefixes(dev):
    click = _statements(dev, "ClickJobRole")
    text = json.dumps(click)
    assert "kinesis:GetRecords" in text and "kafka-cluster" not in text
    assert "checkpoints/clickstream/*" in text and "checkpoints/orders" not in text
    assert "dead_letters/clickstream/*" in text and "dead_letters/orders" not in text
    orders = json.dumps(_statements(dev, "OrderJobRole"))
    assert "kinesis:" not in orders and "kafka-cluster:ReadData" in orders
    wildcard = [s for s in _statements(dev, "OrderJobRole") + click if s.get("Resource") == "*"]
    # only actions with no resource-level permissions, and glue:GetSchemaVersion, which the Avro deserializer
    # calls with a SchemaVersionId that names no registry or schema (AWS's consumer example grants it on *)
    allowed = {"glue:GetSchemaVersion", "cloudwatch:PutMetricData", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
               "ec2:DescribeVpcEndpoints", "ec2:DescribeRouteTables"}
    for statement in wildcard:
        assert _actions(statement) <= allowed, statement
    assert [s["Sid"] for s in wildcard if "glue:GetSchemaVersion" in _actions(s)] == ["ReadSchemaVersionsById"]
    assert "glue:GetSchemaVersion" not in json.dumps([s for s in wildcard if s["Sid"] != "ReadSchemaVersionsById"])
    assert any(s.get("Condition", {}).get("StringEquals", {}).get("cloudwatch:namespace") for s in wildcard)


def test_a_kinesis_job_may_list_its_streams_shards_to_follow_a_reshard(dev):
    """After a reshard the parents close and children with new ids take new records; Glue's Kinesis reader finds them
    with ListShards, at most every `describeShardInterval` (default 1s: "the minimum time interval between two
    ListShards API calls for your script to consider resharding", Kinesis connections page /
    KinesisStreamingSourceOptions). So the role must allow ListShards on the stream (docs/operations.md
    "Resharding"; what the reader does with the closed parents' positions only AWS can show)."""
    statements = [s for s in _statements(dev, "ClickJobRole") if "kinesis:ListShards" in _actions(s)]
    assert statements and all({"kinesis:GetRecords", "kinesis:GetShardIterator"} <= _actions(s) for s in statements)
    resources = json.dumps([s["Resource"] for s in statements])
    assert "Clicks" in resources and "\"*\"" not in resources  # the stream itself (Kinesis "Clicks" in this stack)
    options = _job(dev, "ClickJob")["DefaultArguments"]
    assert not any("shard_interval" in key for key in options)  # the reader's default interval is kept


def test_connection_network_interfaces_are_scoped_to_the_connection_subnet_and_security_group(dev):
    statements = {s.get("Sid"): s for s in _statements(dev, "OrderJobRole")}
    create, delete = statements["GlueConnectionCreateEni"], statements["GlueConnectionDeleteEni"]
    assert _actions(create) == {"ec2:CreateNetworkInterface"} and _actions(delete) == {"ec2:DeleteNetworkInterface"}
    arns = [json.dumps(r) for r in create["Resource"]]
    for subnet in ("subnet-0a1", "subnet-0b1"):
        assert [a for a in arns if f":subnet/{subnet}" in a], subnet
    assert [a for a in arns if ":security-group/sg-0b2" in a]
    assert len(arns) == 4 and ":network-interface/*" in arns[0]
    assert ":network-interface/*" in json.dumps(delete["Resource"])
    attribute = statements["GlueConnectionVpcAttribute"]
    assert _actions(attribute) == {"ec2:DescribeVpcAttribute"} and ":vpc/vpc-0c3" in json.dumps(attribute["Resource"])


def test_prefix_grants_cover_the_prefix_key_and_its_folder_marker(dev):
    """Hadoop asks for the job's root key itself and EMRFS writes `<folder>_$folder$` markers: a grant of
    `prefix/*` alone would answer 403 to both. The streaming job runs Glue 4.0 (EMRFS), compaction 5.1 (S3A)."""
    for role, prefixes, marker in (("ClickJobRole", ("events", "dead_letters/clickstream", "checkpoints/clickstream"), True),
                                   ("CompactionRole", ("events",), False)):
        object_statements = [s for s in _statements(dev, role) if "s3:PutObject" in _actions(s)]
        text = json.dumps(object_statements)
        for prefix in prefixes:
            for key in (f"/{prefix}/*", f"/{prefix}\""):
                assert key in text, (role, key)
            assert (f"/{prefix}_$folder$" in text) is marker, role


def test_compaction_role_touches_only_the_lake_prefix(dev):
    text = json.dumps(_statements(dev, "CompactionRole"))
    assert "events/*" in text and "kinesis" not in text and "kafka" not in text and "dead_letters" not in text


@pytest.mark.parametrize("glue_version,marker", [("4.0", True), ("5.0", True), ("5.1", False), ("6.0", False)])
def test_the_emrfs_folder_marker_is_granted_only_where_emrfs_is_the_s3_connector(glue_version, marker):
    """EMRFS (Glue 4.0, 5.0) writes `<folder>_$folder$` objects; S3A (5.1, 6.0) does not (infra/runtimes.py)."""
    from aws_cdk import aws_iam as iam

    from infra.job_iam import grant_prefix
    from tests.infra.bare import bare_stack

    stack = bare_stack("Grants")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"))
    grant_prefix(role, s3.Bucket(stack, "Lake"), "events", glue_version=glue_version)
    text = json.dumps(assertions.Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
    assert "/events/*" in text and '/events"' in text
    assert ("/events_$folder$" in text) is marker


def test_listing_grants_add_the_bucket_region_and_only_the_top_level_of_the_bucket(dev):
    """Beside the prefix listing: GetBucketLocation (granted to every Glue job by AWS's AWSGlueServiceRole policy) on
    the bucket only, and a listing of the bucket's top level with delimiter "/" (the folders' names, nothing below)."""
    statements = _statements(dev, "ClickJobRole")
    lists = [s for s in statements if _actions(s) == {"s3:ListBucket"}]
    top = [s for s in lists if s["Condition"].get("StringEquals") == {"s3:prefix": "", "s3:delimiter": "/"}]
    prefixed = [s for s in lists if "StringLike" in s["Condition"]]
    assert len(top) == len(prefixed) >= 3 and len(lists) == len(top) + len(prefixed)
    locations = [s for s in statements if _actions(s) == {"s3:GetBucketLocation"}]
    assert len(locations) == len(prefixed) and all("/*" not in json.dumps(s["Resource"]) for s in locations)
