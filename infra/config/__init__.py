"""Environment configuration: declared once in config/environments.json, typed and validated here.

Every environment is the deep merge of the file's `defaults` block and its own block. Validation
collects every problem before any construct is built and reports each one as
`<env>.<field path>: <bad value> <what is allowed>`, e.g.
`prod.streaming.worker_type: 'G.3X' is not one of G.025X, G.1X, G.2X`.

This package imports nothing from aws_cdk so that tests and operations tools can read the
configuration without the CDK installed (job code reads the file itself: compaction/environments.py).

    model.py     allowed values, the frozen dataclasses, ConfigError
    reader.py    _Reader: reads one mapping, collecting problems with their dotted paths
    sections.py  one reader per section, and the environment as a whole
    rules.py     rules that span fields or sections (sources, accounts, alarms, schedule, Glue versions)
    loader.py    the file and its top level: load_config, parse_config, update_raw
"""

from infra.config.loader import DEFAULT_CONFIG_PATH, REPO_ROOT, load_config, parse_config, update_raw
from infra.config.loader import _deep_merge as _deep_merge  # tests build environment blocks with the config's merge
from infra.config.model import (
    BATCH_WORKER_TYPES,
    KAFKA_STARTING_OFFSETS,
    KINESIS_CAPACITY_MODES,
    KINESIS_STARTING_POSITIONS,
    LOG_RETENTION_DAYS,
    LOW_VOLUME_WORKER_TYPES,
    MSK_KAFKA_VERSIONS,
    MSK_MODES,
    NETWORK_MODES,
    PROTECTED_ENVIRONMENTS,
    REMOVAL_POLICIES,
    STREAMING_WORKER_TYPES,
    AlarmConfig,
    CompactionConfig,
    ConfigError,
    EnvironmentConfig,
    KinesisStreamConfig,
    LakeFormationConfig,
    MskConfig,
    NetworkConfig,
    ProjectConfig,
    ReadersConfig,
    RouteConfig,
    StorageConfig,
    StreamingJobConfig,
    streaming_worker_types,
)
from infra.config.rules import (
    COMPACTION_SCHEDULE_MARGIN_MINUTES,
    COMPACTION_START_WAIT_MINUTES,
    schedule_interval_minutes,
)

__all__: list[str] = [
    "AlarmConfig",
    "BATCH_WORKER_TYPES",
    "COMPACTION_SCHEDULE_MARGIN_MINUTES",
    "COMPACTION_START_WAIT_MINUTES",
    "CompactionConfig",
    "ConfigError",
    "DEFAULT_CONFIG_PATH",
    "EnvironmentConfig",
    "KAFKA_STARTING_OFFSETS",
    "KINESIS_CAPACITY_MODES",
    "KINESIS_STARTING_POSITIONS",
    "KinesisStreamConfig",
    "LakeFormationConfig",
    "LOG_RETENTION_DAYS",
    "LOW_VOLUME_WORKER_TYPES",
    "MSK_KAFKA_VERSIONS",
    "MSK_MODES",
    "MskConfig",
    "NETWORK_MODES",
    "NetworkConfig",
    "PROTECTED_ENVIRONMENTS",
    "ProjectConfig",
    "REMOVAL_POLICIES",
    "REPO_ROOT",
    "STREAMING_WORKER_TYPES",
    "ReadersConfig",
    "RouteConfig",
    "StorageConfig",
    "StreamingJobConfig",
    "load_config",
    "parse_config",
    "schedule_interval_minutes",
    "streaming_worker_types",
    "update_raw",
]
