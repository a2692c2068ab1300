"""The Kinesis Data Streams of one environment, one per configured stream, encrypted with the data key."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import KinesisStreamConfig
from infra.constants import SHARD_LEVEL_METRICS, pascal
from infra.nag import acknowledge
from infra.naming import retained_name

_MODES = {"on_demand": kinesis.StreamMode.ON_DEMAND, "provisioned": kinesis.StreamMode.PROVISIONED}


def stream_name(project: str, environment: str, source_name: str) -> str:
    return f"{project}-{environment}-{source_name}"


class Streams(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        project: str,
        environment: str,
        streams: Sequence[KinesisStreamConfig],
        encryption_key: kms.IKey,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, id_)
        # {source name: stream}; the source name is the config's stream name (and the job's source).
        self.streams: dict[str, kinesis.Stream] = {}
        for settings in streams:
            stream = kinesis.Stream(
                self,
                pascal(settings.name),
                stream_name=retained_name(stream_name(project, environment, settings.name), removal_policy),
                stream_mode=_MODES[settings.capacity_mode],
                shard_count=settings.shard_count if settings.capacity_mode == "provisioned" else None,
                retention_period=cdk.Duration.hours(settings.retention_hours),
                encryption=kinesis.StreamEncryption.KMS,
                encryption_key=encryption_key,
                removal_policy=removal_policy,
                # Shard-level metrics (AWS::Kinesis::Stream DesiredShardLevelMetrics; "Monitoring the Amazon Kinesis Data
                # Streams service with CloudWatch", enhanced shard-level metrics): a hot shard throttles or lags while
                # the stream-level sums look fine. Each is a CloudWatch metric per shard (priced in sizing).
                shard_level_metrics=[kinesis.ShardLevelMetrics[name] for name in SHARD_LEVEL_METRICS],
            )
            acknowledge(
                stream,
                "AwsSolutions-KDS3",
                "The stream uses the environment's customer managed data key on purpose: access is revocable "
                "and auditable through one key policy shared with the lake, and the extra KMS calls are bounded "
                "because Kinesis caches data keys per shard.",
            )
            self.streams[settings.name] = stream

    @property
    def stream_names(self) -> dict[str, str]:
        """{source name: Kinesis stream name}, e.g. for Monitoring(stream_names=...)."""
        return {source: stream.stream_name for source, stream in self.streams.items()}
