"""Where the tools find deployed resource names: the CloudFormation outputs of `<project>-<env>`.

This is the ONLY place that knows output keys. If infra/stack.py renames an output, change the
matching line below and nothing else. Per-source keys end in the source name in PascalCase
(`clickstream` -> `Clickstream`, `web-clicks` -> `WebClicks`), the same rule infra/ uses for
construct ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.config import ConfigError, EnvironmentConfig, load_config
from infra.constants import (
    pascal,  # noqa: F401  (re-exported for the tools)
    stack_name,
)
from operations.errors import ToolError

# --- Output keys (one line per key; `{source}` is the PascalCase source name) ------------------
KINESIS_STREAM_NAME = "KinesisStreamName{source}"
STREAMING_JOB_NAME = "StreamingJobName{source}"
CHECKPOINT_PATH = "CheckpointPath{source}"  # s3://<checkpoint bucket>/<prefix>/<source>/
DEAD_LETTER_PATH = "DeadLetterPath{source}"  # s3://<dead-letter bucket>/dead_letters/<source>
SOURCE_TABLE_NAME = "SourceTableName{source}"
LAKE_TABLE_NAME = "LakeTableName"
DATASET_LAKE_TABLE_NAME = "LakeTableName{source}"  # `{source}`: the PascalCase dataset name
DATASET_SCHEMA_NAME = "SchemaName{source}"  # the dataset's registry schema
CATALOG_DATABASE_NAME = "CatalogDatabaseName"
SCHEMA_REGISTRY_NAME = "SchemaRegistryName"
EVENT_SCHEMA_NAME = "EventSchemaName"
COMPACTION_JOB_NAME = "CompactionJobName"
MSK_TOPIC_NAME = "MskTopicName"
MSK_BOOTSTRAP_SERVERS = "MskBootstrapServers"  # SASL/IAM brokers (port 9098)
KAFKA_PRODUCER_POLICY_ARN = "KafkaProducerPolicyArn"  # managed policy to attach to a producer's role


@dataclass(frozen=True)
class Environment:
    """An environment as the tools see it: its validated config and its stack name."""

    name: str
    project: str
    config: EnvironmentConfig

    @property
    def stack_name(self) -> str:
        return stack_name(self.project, self.name)

    @property
    def region(self) -> str | None:
        return self.config.region

    def check_source(self, source: str) -> str:
        if source not in self.config.source_names:
            allowed = ", ".join(self.config.source_names) or "(none)"
            raise ToolError(f"--source {source!r} is not a source of environment {self.name!r}; configured: {allowed}")
        return source

    def kinesis_sources(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.config.kinesis_streams)


def load_environment(name: str, config_path: str | None = None) -> Environment:
    try:
        project = load_config(config_path)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None
    if name not in project.environments:
        raise ToolError(f"--environment {name!r} is not an environment of the config; configured: "
                        f"{', '.join(project.environments)}")
    return Environment(name=name, project=project.project, config=project.get(name))


@dataclass
class StackOutputs:
    """The outputs of one deployed stack, read once with describe_stacks."""

    stack_name: str
    outputs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def fetch(cls, cloudformation, stack: str) -> StackOutputs:
        from botocore.exceptions import ClientError

        try:
            stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as exc:
            if "does not exist" in str(exc):
                raise ToolError(
                    f"stack {stack!r} does not exist in this account/region: deploy the environment first "
                    "(or check AWS_PROFILE / --region)"
                ) from None
            raise
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        return cls(stack_name=stack, outputs=outputs)

    def get(self, key_template: str, source: str | None = None) -> str:
        key = key_template.format(source=pascal(source)) if source is not None else key_template
        try:
            return self.outputs[key]
        except KeyError:
            known = ", ".join(sorted(self.outputs)) or "(none)"
            raise ToolError(
                f"stack {self.stack_name!r} has no output {key!r} (needed to find "
                f"{'the ' + source + ' ' if source else 'the '}resource); outputs present: {known}"
            ) from None

    # --- Named lookups, so commands read like what they need -----------------------------------
    def kinesis_stream(self, source: str) -> str:
        return self.get(KINESIS_STREAM_NAME, source)

    def streaming_job(self, source: str) -> str:
        return self.get(STREAMING_JOB_NAME, source)

    def checkpoint_path(self, source: str) -> str:
        return self.get(CHECKPOINT_PATH, source)

    def dead_letter_path(self, source: str) -> str:
        return self.get(DEAD_LETTER_PATH, source)

    def source_table(self, source: str) -> str:
        return self.get(SOURCE_TABLE_NAME, source)

    def lake_table(self) -> str:
        return self.get(LAKE_TABLE_NAME)

    def dataset_lake_table(self, dataset: str) -> str:
        return self._dataset_key(DATASET_LAKE_TABLE_NAME, LAKE_TABLE_NAME, dataset)

    def dataset_schema(self, dataset: str) -> str:
        return self._dataset_key(DATASET_SCHEMA_NAME, EVENT_SCHEMA_NAME, dataset)

    def _dataset_key(self, template: str, clickstream_key: str, dataset: str) -> str:
        """A per-dataset output; a stack deployed before datasets had clickstream's under its older key."""
        if dataset == "clickstream" and template.format(source=pascal(dataset)) not in self.outputs and clickstream_key in self.outputs:
            return self.outputs[clickstream_key]
        return self.get(template, dataset)

    def catalog_database(self) -> str:
        return self.get(CATALOG_DATABASE_NAME)

    def schema_registry(self) -> str:
        return self.get(SCHEMA_REGISTRY_NAME)

    def event_schema(self) -> str:
        return self.get(EVENT_SCHEMA_NAME)

    def compaction_job(self) -> str:
        return self.get(COMPACTION_JOB_NAME)

    def kafka_topic(self) -> str:
        return self.get(MSK_TOPIC_NAME)

    def kafka_bootstrap_servers(self) -> str:
        return self.get(MSK_BOOTSTRAP_SERVERS)


def required_output_keys(sources: tuple[str, ...], kinesis_sources: tuple[str, ...], datasets: tuple[str, ...] = ()) -> list[str]:
    """Every output key some command reads, for the documentation and the infra check."""
    keys = [LAKE_TABLE_NAME, CATALOG_DATABASE_NAME, SCHEMA_REGISTRY_NAME, EVENT_SCHEMA_NAME, COMPACTION_JOB_NAME]
    if set(sources) - set(kinesis_sources):  # an MSK source: `produce` sends to its topic
        keys += [MSK_TOPIC_NAME, MSK_BOOTSTRAP_SERVERS, KAFKA_PRODUCER_POLICY_ARN]
    for source in sources:
        for template in (STREAMING_JOB_NAME, CHECKPOINT_PATH, DEAD_LETTER_PATH):
            keys.append(template.format(source=pascal(source)))
    keys += [template.format(source=pascal(s)) for s in kinesis_sources for template in (KINESIS_STREAM_NAME, SOURCE_TABLE_NAME)]
    keys += [template.format(source=pascal(d)) for d in datasets for template in (DATASET_SCHEMA_NAME, DATASET_LAKE_TABLE_NAME)]
    return keys
