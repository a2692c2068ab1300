"""Kinesis streams: one per configured stream, KMS-encrypted, capacity mode and retention from config."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import assertions
from aws_cdk import aws_kms as kms

from infra.config import KinesisStreamConfig
from infra.streams import Streams
from tests.infra.bare import bare_stack


def test_streams_are_encrypted_with_the_data_key_and_sized_from_config():
    stack = bare_stack("Streams")
    key = kms.Key(stack, "DataKey")
    streams = Streams(
        stack, "Streams", project="streamlake", environment="qa",
        streams=(
            KinesisStreamConfig("clickstream", "provisioned", 4, 168),
            KinesisStreamConfig("web-clicks", "on_demand", None, 24),
        ),
        encryption_key=key, removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    template = assertions.Template.from_stack(stack)
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    found = {r["Properties"]["Name"]: r for r in template.find_resources("AWS::Kinesis::Stream").values()}
    assert found["streamlake-qa-clickstream"]["Properties"] == {
        "Name": "streamlake-qa-clickstream",
        "RetentionPeriodHours": 168,
        "ShardCount": 4,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": key_arn},
        "StreamModeDetails": {"StreamMode": "PROVISIONED"},
    }
    assert found["streamlake-qa-web-clicks"]["Properties"] == {
        "Name": "streamlake-qa-web-clicks",
        "RetentionPeriodHours": 24,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": key_arn},
        "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
    }
    assert {r["DeletionPolicy"] for r in found.values()} == {"Retain"}
    assert sorted(streams.streams) == ["clickstream", "web-clicks"]
    assert sorted(streams.stream_names) == ["clickstream", "web-clicks"]
