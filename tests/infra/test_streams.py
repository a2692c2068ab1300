"""Kinesis streams: one per configured stream, KMS-encrypted, capacity mode and retention from config."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import assertions
from aws_cdk import aws_kms as kms

from infra.config import KinesisStreamConfig
from infra.streams import Streams
from tests.infra.bare import bare_stack, instance_named

# Shard-level metrics on every stream: a hot shard throttles or lags while the stream's sums look fine.
SHARD_METRICS = ["IncomingBytes", "IncomingRecords", "IteratorAgeMilliseconds", "WriteProvisionedThroughputExceeded"]


def test_streams_are_encrypted_with_the_data_key_and_sized_from_config():
    stack = bare_stack("Streams")
    key = kms.Key(stack, "DataKey")
    streams = Streams(
        stack, "Streams", project="streamlake", environment="qa",
        streams=(
            KinesisStreamConfig("clickstream", "provisioned", 4, 168, "clickstream"),
            KinesisStreamConfig("web-clicks", "on_demand", None, 24, "clickstream"),
        ),
        encryption_key=key, removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    template = assertions.Template.from_stack(stack)
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    # Retained streams are named per stack instance, so the environment can be created again (infra/naming.py).
    found = {r["Properties"]["Name"]["Fn::Join"][1][0]: r for r in template.find_resources("AWS::Kinesis::Stream").values()}
    assert found["streamlake-qa-clickstream"]["Properties"] == {
        "Name": instance_named("streamlake-qa-clickstream"),
        "RetentionPeriodHours": 168,
        "ShardCount": 4,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": key_arn},
        "StreamModeDetails": {"StreamMode": "PROVISIONED"},
        "DesiredShardLevelMetrics": SHARD_METRICS,
    }
    assert found["streamlake-qa-web-clicks"]["Properties"] == {
        "Name": instance_named("streamlake-qa-web-clicks"),
        "RetentionPeriodHours": 24,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": key_arn},
        "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
        "DesiredShardLevelMetrics": SHARD_METRICS,
    }
    assert {r["DeletionPolicy"] for r in found.values()} == {"Retain"}
    assert sorted(streams.streams) == ["clickstream", "web-clicks"]
    assert sorted(streams.stream_names) == ["clickstream", "web-clicks"]


def test_a_stream_destroyed_with_its_stack_keeps_its_plain_name():
    stack = bare_stack("Streams")
    Streams(stack, "Streams", project="streamlake", environment="dev",
            streams=(KinesisStreamConfig("clickstream", "on_demand", None, 24, "clickstream"),),
            encryption_key=kms.Key(stack, "DataKey"), removal_policy=cdk.RemovalPolicy.DESTROY)
    (stream,) = assertions.Template.from_stack(stack).find_resources("AWS::Kinesis::Stream").values()
    assert stream["Properties"]["Name"] == "streamlake-dev-clickstream"
