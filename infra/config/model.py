"""The typed environment configuration: the allowed values, the frozen dataclasses the constructs take, and
ConfigError. Glue versions, what each runs and which job kinds may use which: infra/runtimes.py."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# G.025X exists for streaming jobs only; Flex (compaction) supports G.1X and G.2X.
STREAMING_WORKER_TYPES = ("G.025X", "G.1X", "G.2X")
BATCH_WORKER_TYPES = ("G.1X", "G.2X")
KINESIS_CAPACITY_MODES = ("on_demand", "provisioned")
KINESIS_STARTING_POSITIONS = ("TRIM_HORIZON", "LATEST")
KAFKA_STARTING_OFFSETS = ("earliest", "latest")
MSK_MODES = ("none", "provisioned", "serverless", "existing")
NETWORK_MODES = ("create", "existing")
REMOVAL_POLICIES = ("retain", "destroy")
# Kafka versions MSK offers that this project has been checked against (AWS::MSK::Cluster KafkaVersion).
# 3.8.x is MSK's recommended version; 3.6.0 reached end of support on 2026-06-01 and MSK phases out
# new clusters on such versions (https://docs.aws.amazon.com/msk/latest/developerguide/supported-kafka-versions.html).
# All of these are >= 3.6.0, which AWS::MSK::Topic needs to create the topic from the stack.
MSK_KAFKA_VERSIONS = ("3.7.x", "3.8.x", "3.9.x")
# Topic-level compression.type values (MSK "Custom Amazon MSK configurations": gzip, snappy, lz4, zstd,
# uncompressed, or producer to keep the producer's codec).
TOPIC_COMPRESSION_TYPES = ("zstd", "lz4", "snappy", "gzip", "uncompressed", "producer")
# vCPUs of one worker of each streaming worker type (Glue "Defining job properties for Spark jobs", worker type):
# G.025X 2, G.1X 4, G.2X 8. One worker runs the driver; the others run executors with one core per vCPU.
WORKER_VCPUS = {"G.025X": 2, "G.1X": 4, "G.2X": 8}


def executor_cores(worker_type: str, max_workers: int) -> int:
    """Executor cores of a Glue job at its largest size (one worker is the driver): one Spark task each."""
    return (max_workers - 1) * WORKER_VCPUS[worker_type]


# Retention values CloudWatch Logs accepts (AWS::Logs::LogGroup RetentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
PROTECTED_ENVIRONMENTS = ("prod",)
# AWS positions G.025X for low-volume streams; a protected environment runs on larger workers.
LOW_VOLUME_WORKER_TYPES = ("G.025X",)


def streaming_worker_types(environment: str) -> tuple[str, ...]:
    """The worker types a streaming job may use in `environment` (rules.py and the sizing use this)."""
    if environment in PROTECTED_ENVIRONMENTS:
        return tuple(t for t in STREAMING_WORKER_TYPES if t not in LOW_VOLUME_WORKER_TYPES)
    return STREAMING_WORKER_TYPES


# What a valid value looks like (the section readers and the rules match against these).
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_ACCOUNT_RE = re.compile(r"^\d{12}$")
_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
_VPC_ID_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_CIDR_RE = re.compile(r"^(\d{1,3}\.){3}\d{1,3}/(1[6-9]|2[0-8])$")
_CRON_RE = re.compile(r"^cron\((\S+ ){5}\S+\)$")
_MAINTENANCE_RE = re.compile(r"^(MON|TUE|WED|THU|FRI|SAT|SUN):([01]\d|2[0-3])$")
_KAFKA_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_MSK_ARN_RE = re.compile(r"^arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9-]+/[A-Za-z0-9-]+$")
_BOOTSTRAP_RE = re.compile(r"^[A-Za-z0-9.-]+:\d{2,5}(,[A-Za-z0-9.-]+:\d{2,5})*$")
_DATASET_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")  # glue_jobs/datasets.py's rule for a datasets/ folder
_TAG_KEY_RE = re.compile(r"^[\w .:/=+\-@]{1,128}$")


class ConfigError(ValueError):
    """One or more configuration values are invalid; the message lists each one on its own line."""

    def __init__(self, problems: Sequence[str], source: str = "") -> None:
        self.problems = list(problems)
        where = f" in {source}" if source else ""
        header = f"invalid environment configuration{where} ({len(self.problems)} problem(s)):"
        super().__init__("\n".join([header, *(f"  {p}" for p in self.problems)]))


@dataclass(frozen=True)
class NetworkConfig:
    mode: str
    vpc_cidr: str | None
    max_azs: int
    nat_gateways: int
    vpc_id: str | None
    availability_zones: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]


@dataclass(frozen=True)
class StorageConfig:
    temp_expiration_days: int
    checkpoint_noncurrent_expiration_days: int
    lake_noncurrent_expiration_days: int
    dead_letter_transition_days: int
    dead_letter_expiration_days: int
    access_log_expiration_days: int
    lake_infrequent_access_days: int | None = None  # lake data files move to S3 Standard-IA at this age; None: never


@dataclass(frozen=True)
class RouteConfig:
    """A routed stream's `route` (docs/datasets.md "One stream, several datasets"): the field read from each record
    (a path, `type` or `meta.type`) and, per value, the dataset records with that value belong to."""

    field: str
    values: tuple[tuple[str, str], ...]  # (value, dataset), sorted by value

    @property
    def datasets(self) -> tuple[str, ...]:
        return tuple(sorted({dataset for _, dataset in self.values}))


@dataclass(frozen=True)
class KinesisStreamConfig:
    name: str
    capacity_mode: str
    shard_count: int | None
    retention_hours: int
    dataset: str | None  # the dataset its records are (datasets/<dataset>/); None for a routed stream
    route: RouteConfig | None = None  # a routed stream: its records are several datasets, routed by a field

    @property
    def datasets(self) -> tuple[str, ...]:
        """The datasets the stream carries: its `dataset`, or its route's."""
        if self.route is not None:
            return self.route.datasets
        return (self.dataset,) if self.dataset else ()


@dataclass(frozen=True)
class MskConfig:
    mode: str
    source_name: str
    dataset: str | None  # the dataset the topic's records are (datasets/<dataset>/); None for a routed topic
    topic: str
    topic_partitions: int
    kafka_version: str
    broker_instance_type: str
    broker_count: int
    broker_volume_gb: int
    broker_log_retention_days: int
    bootstrap_servers: str | None
    cluster_arn: str | None
    topic_retention_hours: int = 168  # the topic's retention.ms; the lag alarm fires at half of it
    topic_compression_type: str = "zstd"
    min_partitions: int | str | None = "auto"  # Spark's minPartitions: "auto", a number, or null (not set)
    partition_groups: tuple[tuple[int, ...], ...] | None = None  # one job per group (Spark's `assign`); None: one job
    # A routed topic (docs/kafka.md "One topic, several datasets"): the datasets its frames are, each frame routed to
    # the dataset whose registry schema its writer's schema version belongs to. () for a topic of one `dataset`.
    datasets: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    @property
    def routed(self) -> bool:
        return bool(self.datasets)

    @property
    def carried(self) -> tuple[str, ...]:
        """The datasets the topic carries: its `dataset`, or its `datasets`."""
        return self.datasets if self.datasets else ((self.dataset,) if self.dataset else ())

    @property
    def source_names(self) -> tuple[str, ...]:
        """The Kafka sources, one streaming job each: `source_name`, or `<source_name>-p<i>` per partition group."""
        if not self.enabled:
            return ()
        if not self.partition_groups:
            return (self.source_name,)
        return tuple(f"{self.source_name}-p{i}" for i in range(len(self.partition_groups)))

    @property
    def topic_configs(self) -> dict[str, str]:
        """The topic-level Kafka configs of the config (compression.type, retention.ms), for AWS::MSK::Topic's Configs
        (infra/msk.py) and the local broker's topic (devtools/kafka_broker.create_topic)."""
        return {"compression.type": self.topic_compression_type, "retention.ms": str(self.topic_retention_hours * 3_600_000)}

    def partitions_of(self, source: str) -> tuple[int, ...] | None:
        """The partitions the job of `source` reads (None: all of the topic's, with `subscribe`)."""
        if not self.partition_groups:
            return None
        return self.partition_groups[self.source_names.index(source)]

    def min_partitions_for(self, source: str, worker_type: str, max_workers: int) -> int | None:
        """Spark's minPartitions for the job of `source`: "auto" asks for one Spark partition per executor core at the
        job's largest size when it reads fewer Kafka partitions than that (AWS Glue streaming best practices: raise
        the parallelism when there are fewer partitions than cores); a number is taken as it is."""
        if self.min_partitions != "auto":
            return self.min_partitions
        cores = executor_cores(worker_type, max_workers)
        reads = len(self.partitions_of(source) or range(self.topic_partitions))
        return cores if reads < cores else None


# Kinesis read limits (Kinesis Data Streams quotas and limits): GetRecords returns at most 10,000 records per call
# (Glue's maxRecordPerRead default is the same 10000) and a shard serves 5 GetRecords calls per second.
KINESIS_RECORDS_PER_GET = 10_000
KINESIS_GETS_PER_SECOND = 5
GLUE_MAX_FETCH_TIME_MS = 1_000  # Glue's maxFetchTimeInMs default (Kinesis connection option reference)


@dataclass(frozen=True)
class StreamingJobConfig:
    glue_version: str
    worker_type: str
    max_workers: int
    window_size_seconds: int
    batch_max_retries: int
    kinesis_starting_position: str
    kafka_starting_offsets: str
    max_fetch_records_per_shard: int
    max_offsets_per_trigger: int
    maintenance_window: str | None

    @property
    def executor_cores(self) -> int:
        return executor_cores(self.worker_type, self.max_workers)

    @property
    def max_fetch_time_ms(self) -> int:
        """Glue's maxFetchTimeInMs, sized so a batch can reach max_fetch_records_per_shard: Glue's default (1000 ms:
        at most 5 GetRecords calls of 10,000 records, 50,000 records) cut the default 100,000 in half. One call per
        10,000 records at 5 calls per second per shard, at least Glue's default, at most half the window (the read
        must leave the batch time to write)."""
        calls = -(-self.max_fetch_records_per_shard // KINESIS_RECORDS_PER_GET)
        wanted = calls * 1_000 // KINESIS_GETS_PER_SECOND
        return max(GLUE_MAX_FETCH_TIME_MS, min(wanted, self.window_size_seconds * 1_000 // 2))


@dataclass(frozen=True)
class StreamingJobGroup:
    """One streaming Glue job and the sources it runs: declared in `streaming_jobs`, or a source no declared job
    names, which gets a job of its own named after it (as before jobs were declared)."""

    name: str
    sources: tuple[str, ...]
    settings: StreamingJobConfig  # the environment's `streaming` block, with the job's own `streaming` over it
    declared: bool = True


@dataclass(frozen=True)
class CompactionConfig:
    glue_version: str
    worker_type: str
    workers: int
    flex: bool
    schedule: str
    target_file_mb: int
    grace_minutes: int
    lookback_hours: int
    timeout_minutes: int
    # Iceberg datasets: snapshots older than this are expired by the hourly maintenance (compaction/iceberg_maintenance.py)
    iceberg_snapshot_retention_hours: int = 168


@dataclass(frozen=True)
class ReadersConfig:
    """Who queries the lake (infra/readers.py): the Athena workgroup's enforced limits."""
    bytes_scanned_cutoff_mb: int  # a query scanning more is cancelled (Athena's minimum: 10 MB)
    results_expiration_days: int  # query results expire from their bucket after this many days


@dataclass(frozen=True)
class LakeFormationConfig:
    """Lake Formation mode (infra/lake_formation.py, docs/lake-formation.md): off, the catalog is governed by IAM only."""
    enabled: bool = False  # register the lake bucket and grant the job roles and each dataset's reader role
    # Iceberg datasets whose table the streaming job has created (its first run): Lake Formation grants on a table that
    # does not exist fail, so the compaction role's and the reader role's grants on it wait for this list.
    iceberg_tables_created: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlarmConfig:
    iterator_age_ms: int
    iterator_age_evaluation_periods: int
    consumer_lag_ms: int
    batch_overrun_evaluation_periods: int
    no_records_minutes: int
    dead_letter_percent: float
    msk_disk_used_percent: int
    compaction_missed_hours: int
    freshness_minutes: int  # per dataset: the newest event time a batch wrote lags behind it by more than this
    no_data_minutes: int | None  # per dataset: no record read by any of its sources for this long (None: no alarm)


@dataclass(frozen=True)
class EnvironmentConfig:
    name: str
    account: str | None
    region: str | None
    removal_policy: str
    tags: Mapping[str, str]
    notification_emails: tuple[str, ...]
    network: NetworkConfig
    storage: StorageConfig
    kinesis_streams: tuple[KinesisStreamConfig, ...]
    msk: MskConfig
    streaming: StreamingJobConfig
    compaction: CompactionConfig
    alarms: AlarmConfig
    readers: ReadersConfig = ReadersConfig(bytes_scanned_cutoff_mb=10_240, results_expiration_days=7)
    lake_formation: LakeFormationConfig = LakeFormationConfig()
    # {dataset: "parquet" | "iceberg"}: this environment's table format for a dataset, over its dataset.json's
    table_formats: Mapping[str, str] = field(default_factory=dict)
    streaming_jobs: tuple[StreamingJobGroup, ...] = ()  # the declared jobs (`job_groups` adds one per other source)

    def table_format(self, dataset: str, declared: str) -> str:
        """The dataset's table format here: the environment's `table_formats` entry, else `declared` (its
        dataset.json's `table_format`)."""
        return self.table_formats.get(dataset, declared)

    @property
    def source_names(self) -> tuple[str, ...]:
        """Every source that gets its own streaming job: the Kinesis streams, then MSK if enabled."""
        return tuple(s.name for s in self.kinesis_streams) + self.msk.source_names

    @property
    def job_groups(self) -> tuple[StreamingJobGroup, ...]:
        """Every streaming job: the declared ones, then a job of its own for each source none of them names."""
        grouped = {source for job in self.streaming_jobs for source in job.sources}
        return self.streaming_jobs + tuple(StreamingJobGroup(source, (source,), self.streaming, declared=False)
                                           for source in self.source_names if source not in grouped)

    def job_of(self, source: str) -> StreamingJobGroup:
        """The streaming job that runs `source`."""
        return next(job for job in self.job_groups if source in job.sources)

    @property
    def carried(self) -> dict[str, tuple[str, ...]]:
        """{source name: the datasets it carries} for every source with a streaming job: one, or a routed stream's
        several (`routes`)."""
        datasets = {s.name: s.datasets for s in self.kinesis_streams}
        return datasets | {source: self.msk.carried for source in self.msk.source_names}

    @property
    def routes(self) -> dict[str, RouteConfig]:
        """{source name: its route} for every stream routed by a field (Kinesis)."""
        return {s.name: s.route for s in self.kinesis_streams if s.route is not None}

    @property
    def routed(self) -> dict[str, str]:
        """{source name: what it is routed by} for every routed source: a Kinesis stream's route field, "schema" for
        each job of a routed MSK topic (the `route_field` the stack writes for it, glue_jobs/job_arguments.py)."""
        from glue_jobs.job_arguments import ROUTED_BY_SCHEMA

        kafka = {source: ROUTED_BY_SCHEMA for source in self.msk.source_names} if self.msk.routed else {}
        return {name: route.field for name, route in self.routes.items()} | kafka

    def sources_of(self, dataset: str) -> tuple[str, ...]:
        """The sources that carry `dataset`, in source order."""
        return tuple(source for source, datasets in self.carried.items() if dataset in datasets)

    @property
    def datasets(self) -> tuple[str, ...]:
        """The datasets some source of the environment carries, sorted: each gets its lake table."""
        return tuple(sorted({d for datasets in self.carried.values() for d in datasets}))


@dataclass(frozen=True)
class ProjectConfig:
    project: str
    environments: Mapping[str, EnvironmentConfig] = field(default_factory=dict)

    def get(self, name: str) -> EnvironmentConfig:
        if name not in self.environments:
            raise ConfigError(
                [f"{name}: unknown environment; configured: {', '.join(self.environments)}"]
            )
        return self.environments[name]

