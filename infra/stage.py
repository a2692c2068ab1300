"""One CDK Stage per environment, so `cdk deploy 'dev/*'` deploys exactly one environment."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from infra.config import EnvironmentConfig
from infra.constants import STACK_ID, stack_name
from infra.stack import StreamingLakeStack


class StreamingLakeStage(cdk.Stage):
    def __init__(self, scope: Construct, *, config: EnvironmentConfig, project: str) -> None:
        # Environment-agnostic unless the config pins account and region (validated as a pair),
        # so synth never needs credentials.
        env = cdk.Environment(account=config.account, region=config.region) if config.account else None
        super().__init__(scope, config.name, env=env)
        self.stack = StreamingLakeStack(
            self,
            STACK_ID,
            config=config,
            project=project,
            stack_name=stack_name(project, config.name),
            description=f"{project} streaming lake ({config.name})",
        )
