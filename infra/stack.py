"""The per-environment stack: composes the units and wires them together, nothing else."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import EnvironmentConfig


class StreamingLakeStack(cdk.Stack):
    def __init__(self, scope: Construct, id_: str, *, config: EnvironmentConfig, project: str, **kwargs) -> None:
        super().__init__(scope, id_, **kwargs)
        self.config = config
        self.removal_policy = (
            cdk.RemovalPolicy.RETAIN if config.removal_policy == "retain" else cdk.RemovalPolicy.DESTROY
        )
        for key, value in sorted(config.tags.items()):
            cdk.Tags.of(self).add(key, value)

        # Placeholder until the storage construct owns the keys.
        self.data_key = kms.Key(
            self, "DataKey", enable_key_rotation=True, removal_policy=self.removal_policy,
            description=f"{project} {config.name} data at rest",
        )
