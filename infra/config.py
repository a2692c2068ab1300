"""Environment configuration: declared once in config/environments.json, typed and validated here.

Every environment is the deep merge of the file's `defaults` block and its own block. Validation
collects every problem before any construct is built and reports each one as
`<env>.<field path>: <bad value> <what is allowed>`, e.g.
`prod.streaming.worker_type: 'G.3X' is not one of G.025X, G.1X, G.2X`.

This module imports nothing from aws_cdk so that job code, tests and operations tools can read the
configuration without the CDK installed.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.runtimes import BATCH_GLUE_VERSIONS, LOCAL_SPARK_LINES, RUNTIMES, STREAMING_GLUE_VERSIONS

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "environments.json"

# Glue versions, what each runs, and which job kinds may use which: infra/runtimes.py (with citations).
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
# Retention values CloudWatch Logs accepts (AWS::Logs::LogGroup RetentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
PROTECTED_ENVIRONMENTS = ("prod",)
# AWS positions G.025X for low-volume streams; a protected environment runs on larger workers.
LOW_VOLUME_WORKER_TYPES = ("G.025X",)


def streaming_worker_types(environment: str) -> tuple[str, ...]:
    """The worker types a streaming job may use in `environment` (the validation below and the sizing use this)."""
    if environment in PROTECTED_ENVIRONMENTS:
        return tuple(t for t in STREAMING_WORKER_TYPES if t not in LOW_VOLUME_WORKER_TYPES)
    return STREAMING_WORKER_TYPES

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
_TAG_KEY_RE = re.compile(r"^[\w .:/=+\-@]{1,128}$")


# How long a compaction run may wait for capacity before it starts, by execution class (Glue "Job run
# statuses" page, docs.aws.amazon.com/glue/latest/dg/job-run-statuses.html): a Flex run stays WAITING
# for up to 20 minutes; a Standard run waiting for resources is retried for up to 15 minutes.
COMPACTION_START_WAIT_MINUTES = {True: 20, False: 15}
# Room left between a run's latest possible end and the next trigger.
COMPACTION_SCHEDULE_MARGIN_MINUTES = 5


def schedule_interval_minutes(schedule: str) -> int | None:
    """Minutes between two firings of a compaction schedule of the supported shapes: minute fixed, and
    hour '*' (hourly), '*/N' or '0/N' with N dividing 24 (every N hours), day/month/weekday/year unset.
    None for any other cron expression."""
    match = re.fullmatch(r"cron\((\d{1,2}) (\*|\*/\d{1,2}|0/\d{1,2}) \* \* \? \*\)", schedule)
    if not match or int(match.group(1)) > 59:
        return None
    hours = match.group(2)
    step = 1 if hours == "*" else int(hours.split("/")[1])
    return step * 60 if step >= 1 and 24 % step == 0 else None


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


@dataclass(frozen=True)
class KinesisStreamConfig:
    name: str
    capacity_mode: str
    shard_count: int | None
    retention_hours: int


@dataclass(frozen=True)
class MskConfig:
    mode: str
    source_name: str
    topic: str
    topic_partitions: int
    kafka_version: str
    broker_instance_type: str
    broker_count: int
    broker_volume_gb: int
    broker_log_retention_days: int
    bootstrap_servers: str | None
    cluster_arn: str | None

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


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

    @property
    def source_names(self) -> tuple[str, ...]:
        """Every source that gets its own streaming job: the Kinesis streams, then MSK if enabled."""
        names = tuple(s.name for s in self.kinesis_streams)
        return names + ((self.msk.source_name,) if self.msk.enabled else ())


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


# --------------------------------------------------------------------------------------------
# Reading with error collection


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value)


class _Reader:
    """Reads one mapping of the config, recording every problem with its full dotted path."""

    def __init__(self, data: Any, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        if not isinstance(data, dict):
            self.fail("", data, "must be an object")
            data = {}
        self.data = data
        self.used: set[str] = set()

    def fail(self, key: str, value: Any, message: str) -> None:
        where = f"{self.path}.{key}" if key else self.path
        self.problems.append(f"{where}: {_fmt(value)} {message}")

    def _take(self, key: str, default: Any, required: bool) -> tuple[bool, Any]:
        self.used.add(key)
        if key in self.data:
            return True, self.data[key]
        if required:
            self.problems.append(f"{self.path}.{key}: missing (required)")
        return False, default

    def child(self, key: str) -> _Reader:
        found, value = self._take(key, {}, required=True)
        return _Reader(value if found else {}, f"{self.path}.{key}", self.problems)

    def string(
        self,
        key: str,
        *,
        choices: Sequence[str] | None = None,
        pattern: re.Pattern[str] | None = None,
        allowed: str = "",
        optional: bool = False,
        default: str | None = None,
    ) -> Any:
        found, value = self._take(key, default, required=not optional)
        if not found or (optional and value is None):
            return value if found else default
        if not isinstance(value, str):
            self.fail(key, value, "must be a string")
            return default
        if choices is not None and value not in choices:
            self.fail(key, value, f"is not one of {', '.join(choices)}")
            return default
        if pattern is not None and not pattern.match(value):
            self.fail(key, value, f"is not {allowed or 'valid'}")
            return default
        return value

    def integer(
        self, key: str, *, minimum: int, maximum: int, optional: bool = False, default: int | None = None
    ) -> Any:
        found, value = self._take(key, default, required=not optional)
        if not found or (optional and value is None):
            return value if found else default
        # bool is an int subclass in Python; a JSON true is never a count.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, value, f"must be a whole number from {minimum} to {maximum}")
            return default
        if not minimum <= value <= maximum:
            self.fail(key, value, f"is out of range: allowed {minimum} to {maximum}")
            return default
        return value

    def number(self, key: str, *, minimum: float, maximum: float) -> Any:
        found, value = self._take(key, None, required=True)
        if not found:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, value, f"must be a number from {minimum} to {maximum}")
            return None
        if not minimum <= value <= maximum:
            self.fail(key, value, f"is out of range: allowed {minimum} to {maximum}")
            return None
        return float(value)

    def boolean(self, key: str) -> Any:
        found, value = self._take(key, None, required=True)
        if found and not isinstance(value, bool):
            self.fail(key, value, "must be true or false")
            return None
        return value

    def string_list(
        self, key: str, *, pattern: re.Pattern[str], allowed: str, min_items: int = 0
    ) -> tuple[str, ...]:
        found, value = self._take(key, [], required=False)
        if not isinstance(value, list):
            self.fail(key, value, "must be a list of strings")
            return ()
        good = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not pattern.match(item):
                self.fail(f"{key}[{i}]", item, f"is not {allowed}")
            else:
                good.append(item)
        if len(value) < min_items:
            self.fail(key, value, f"must hold at least {min_items} item(s)")
        return tuple(good)

    def finish(self) -> None:
        for key in sorted(set(self.data) - self.used):
            self.problems.append(
                f"{self.path}.{key}: unknown field; allowed: {', '.join(sorted(self.used))}"
            )


# --------------------------------------------------------------------------------------------
# Sections


def _network(r: _Reader) -> NetworkConfig:
    mode = r.string("mode", choices=NETWORK_MODES)
    cfg = NetworkConfig(
        mode=mode,
        vpc_cidr=r.string("vpc_cidr", pattern=_CIDR_RE, allowed="an IPv4 CIDR from /16 to /28", optional=True),
        max_azs=r.integer("max_azs", minimum=2, maximum=3),
        nat_gateways=r.integer("nat_gateways", minimum=0, maximum=3),
        vpc_id=r.string("vpc_id", pattern=_VPC_ID_RE, allowed="a VPC id like vpc-0123abcd", optional=True),
        availability_zones=r.string_list(
            "availability_zones", pattern=re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$"), allowed="an AZ name like eu-west-1a"
        ),
        private_subnet_ids=r.string_list(
            "private_subnet_ids", pattern=_SUBNET_ID_RE, allowed="a subnet id like subnet-0123abcd"
        ),
    )
    if mode == "existing":
        # Vpc.from_vpc_attributes needs no lookup (and so no credentials) when all of these are given.
        if cfg.vpc_id is None:
            r.fail("vpc_id", None, "is required when mode is 'existing'")
        if len(cfg.private_subnet_ids) < 2:
            r.fail("private_subnet_ids", list(cfg.private_subnet_ids), "must list at least 2 subnets when mode is 'existing'")
        if len(cfg.availability_zones) != len(cfg.private_subnet_ids):
            r.fail(
                "availability_zones",
                list(cfg.availability_zones),
                "must name one AZ per private subnet when mode is 'existing'",
            )
    elif mode == "create":
        if cfg.vpc_cidr is None:
            r.fail("vpc_cidr", None, "is required when mode is 'create'")
        if cfg.vpc_id is not None or cfg.private_subnet_ids:
            r.fail("vpc_id", cfg.vpc_id, "must be null when mode is 'create' (set mode to 'existing' to reuse a VPC)")
        if cfg.nat_gateways == 0:
            r.fail("nat_gateways", 0, "must be at least 1 when mode is 'create': Glue workers in private subnets reach AWS APIs without endpoints for some services")
    r.finish()
    return cfg


def _storage(r: _Reader) -> StorageConfig:
    cfg = StorageConfig(
        temp_expiration_days=r.integer("temp_expiration_days", minimum=1, maximum=365),
        checkpoint_noncurrent_expiration_days=r.integer("checkpoint_noncurrent_expiration_days", minimum=1, maximum=365),
        lake_noncurrent_expiration_days=r.integer("lake_noncurrent_expiration_days", minimum=1, maximum=3650),
        dead_letter_transition_days=r.integer("dead_letter_transition_days", minimum=30, maximum=3650),
        dead_letter_expiration_days=r.integer("dead_letter_expiration_days", minimum=31, maximum=3650),
        access_log_expiration_days=r.integer("access_log_expiration_days", minimum=1, maximum=3650),
    )
    if (
        isinstance(cfg.dead_letter_transition_days, int)
        and isinstance(cfg.dead_letter_expiration_days, int)
        and cfg.dead_letter_expiration_days <= cfg.dead_letter_transition_days
    ):
        r.fail(
            "dead_letter_expiration_days",
            cfg.dead_letter_expiration_days,
            f"must be greater than dead_letter_transition_days ({cfg.dead_letter_transition_days})",
        )
    r.finish()
    return cfg


def _kinesis_streams(r: _Reader) -> tuple[KinesisStreamConfig, ...]:
    found, value = r._take("kinesis_streams", [], required=True)
    if not found:
        return ()
    if not isinstance(value, list):
        r.fail("kinesis_streams", value, "must be a list of stream objects")
        return ()
    streams = []
    for i, item in enumerate(value):
        s = _Reader(item, f"{r.path}.kinesis_streams[{i}]", r.problems)
        mode = s.string("capacity_mode", choices=KINESIS_CAPACITY_MODES)
        stream = KinesisStreamConfig(
            name=s.string("name", pattern=_NAME_RE, allowed="a lower-case name of 2-32 letters, digits and '-'"),
            capacity_mode=mode,
            shard_count=s.integer("shard_count", minimum=1, maximum=10000, optional=True),
            # Kinesis retention: 24 hours to 365 days (8760 hours).
            retention_hours=s.integer("retention_hours", minimum=24, maximum=8760),
        )
        if mode == "provisioned" and stream.shard_count is None:
            s.fail("shard_count", None, "is required when capacity_mode is 'provisioned'")
        if mode == "on_demand" and stream.shard_count is not None:
            s.fail("shard_count", stream.shard_count, "must be null when capacity_mode is 'on_demand'")
        s.finish()
        streams.append(stream)
    names = [s.name for s in streams]
    for dup in sorted({n for n in names if n and names.count(n) > 1}):
        r.fail("kinesis_streams", dup, "is used as a stream name more than once")
    return tuple(streams)


def _msk(r: _Reader) -> MskConfig:
    mode = r.string("mode", choices=MSK_MODES)
    cfg = MskConfig(
        mode=mode,
        source_name=r.string("source_name", pattern=_NAME_RE, allowed="a lower-case name of 2-32 letters, digits and '-'"),
        topic=r.string("topic", pattern=_KAFKA_TOPIC_RE, allowed="a Kafka topic name (letters, digits, '.', '_', '-')"),
        topic_partitions=r.integer("topic_partitions", minimum=1, maximum=1000),
        kafka_version=r.string("kafka_version", choices=MSK_KAFKA_VERSIONS),
        # Standard brokers only (kafka.*): the cluster is built with EBS storage (StorageInfo), and MSK's
        # Express brokers (express.m7g.*) have no customer storage to provision ("With Express brokers, you
        # don't need to provision or manage any storage", MSK developer guide, storage management).
        broker_instance_type=r.string(
            "broker_instance_type", pattern=re.compile(r"^kafka\.[a-z0-9]+\.[a-z0-9]+$"),
            allowed="a Standard MSK broker type like kafka.m7g.large (Express brokers have no EBS storage to provision; "
            "this stack builds Standard brokers)",
        ),
        broker_count=r.integer("broker_count", minimum=2, maximum=30),
        broker_volume_gb=r.integer("broker_volume_gb", minimum=1, maximum=16384),
        broker_log_retention_days=r.integer("broker_log_retention_days", minimum=1, maximum=3653),
        bootstrap_servers=r.string(
            "bootstrap_servers", pattern=_BOOTSTRAP_RE, allowed="a comma-separated host:port list", optional=True
        ),
        cluster_arn=r.string("cluster_arn", pattern=_MSK_ARN_RE, allowed="an MSK cluster ARN", optional=True),
    )
    if isinstance(cfg.broker_log_retention_days, int) and cfg.broker_log_retention_days not in LOG_RETENTION_DAYS:
        r.fail(
            "broker_log_retention_days",
            cfg.broker_log_retention_days,
            f"is not a CloudWatch Logs retention: one of {', '.join(map(str, LOG_RETENTION_DAYS))}",
        )
    if mode == "existing":
        for key in ("bootstrap_servers", "cluster_arn"):
            if getattr(cfg, key) is None:
                r.fail(key, None, "is required when mode is 'existing'")
    elif mode in ("provisioned", "serverless", "none"):
        for key in ("bootstrap_servers", "cluster_arn"):
            if getattr(cfg, key) is not None:
                r.fail(key, getattr(cfg, key), f"must be null when mode is {mode!r} (only 'existing' takes it)")
    r.finish()
    return cfg


def _streaming(r: _Reader) -> StreamingJobConfig:
    cfg = StreamingJobConfig(
        glue_version=r.string("glue_version", choices=tuple(RUNTIMES)),  # narrowed by _glue_version_checks
        worker_type=r.string("worker_type", choices=STREAMING_WORKER_TYPES),
        # With --enable-auto-scaling=true, NumberOfWorkers is the maximum; Glue needs at least 2.
        max_workers=r.integer("max_workers", minimum=2, maximum=299),
        window_size_seconds=r.integer("window_size_seconds", minimum=1, maximum=3600),
        batch_max_retries=r.integer("batch_max_retries", minimum=0, maximum=100),
        kinesis_starting_position=r.string("kinesis_starting_position", choices=KINESIS_STARTING_POSITIONS),
        kafka_starting_offsets=r.string("kafka_starting_offsets", choices=KAFKA_STARTING_OFFSETS),
        max_fetch_records_per_shard=r.integer("max_fetch_records_per_shard", minimum=100, maximum=10_000_000),
        max_offsets_per_trigger=r.integer("max_offsets_per_trigger", minimum=100, maximum=100_000_000),
        maintenance_window=r.string(
            "maintenance_window", pattern=_MAINTENANCE_RE, allowed="a window like 'SUN:02' (day:hour, UTC)", optional=True
        ),
    )
    r.finish()
    return cfg


def _compaction(r: _Reader) -> CompactionConfig:
    cfg = CompactionConfig(
        glue_version=r.string("glue_version", choices=tuple(RUNTIMES)),  # narrowed by _glue_version_checks
        worker_type=r.string("worker_type", choices=BATCH_WORKER_TYPES),
        workers=r.integer("workers", minimum=2, maximum=299),
        flex=r.boolean("flex"),
        schedule=r.string("schedule", pattern=_CRON_RE, allowed="an EventBridge/Glue cron expression like 'cron(15 * * * ? *)'"),
        target_file_mb=r.integer("target_file_mb", minimum=8, maximum=1024),
        grace_minutes=r.integer("grace_minutes", minimum=0, maximum=1440),
        lookback_hours=r.integer("lookback_hours", minimum=1, maximum=24 * 90),
        timeout_minutes=r.integer("timeout_minutes", minimum=5, maximum=2880),
    )
    r.finish()
    return cfg


def _alarms(r: _Reader) -> AlarmConfig:
    cfg = AlarmConfig(
        iterator_age_ms=r.integer("iterator_age_ms", minimum=1_000, maximum=7 * 24 * 3_600_000),
        iterator_age_evaluation_periods=r.integer("iterator_age_evaluation_periods", minimum=1, maximum=60),
        consumer_lag_ms=r.integer("consumer_lag_ms", minimum=1_000, maximum=7 * 24 * 3_600_000),
        batch_overrun_evaluation_periods=r.integer("batch_overrun_evaluation_periods", minimum=1, maximum=60),
        no_records_minutes=r.integer("no_records_minutes", minimum=5, maximum=1440),
        dead_letter_percent=r.number("dead_letter_percent", minimum=0.01, maximum=100),
        msk_disk_used_percent=r.integer("msk_disk_used_percent", minimum=10, maximum=95),
        compaction_missed_hours=r.integer("compaction_missed_hours", minimum=1, maximum=48),
    )
    r.finish()
    return cfg


def _environment(name: str, data: Any, problems: list[str]) -> EnvironmentConfig:
    r = _Reader(data, name, problems)
    if not _NAME_RE.match(name):
        problems.append(f"{name}: environment names must be lower-case letters, digits and '-'")
    removal_policy = r.string("removal_policy", choices=REMOVAL_POLICIES)
    if name in PROTECTED_ENVIRONMENTS and removal_policy == "destroy":
        r.fail("removal_policy", removal_policy, f"is not allowed in {name}: data stores there must be retained")
    tags_found, tags = r._take("tags", {}, required=False)
    if not isinstance(tags, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _TAG_KEY_RE.match(k) and len(v) <= 256 for k, v in tags.items()
    ):
        r.fail("tags", tags, "must map tag keys (1-128 chars) to string values (at most 256 chars)")
        tags = {}
    env = EnvironmentConfig(
        name=name,
        account=r.string("account", pattern=_ACCOUNT_RE, allowed="a 12-digit AWS account id", optional=True),
        region=r.string("region", pattern=_REGION_RE, allowed="an AWS region like eu-west-1", optional=True),
        removal_policy=removal_policy,
        tags=dict(tags),
        notification_emails=r.string_list("notification_emails", pattern=_EMAIL_RE, allowed="an email address"),
        network=_network(r.child("network")),
        storage=_storage(r.child("storage")),
        kinesis_streams=_kinesis_streams(r),
        msk=_msk(r.child("msk")),
        streaming=_streaming(r.child("streaming")),
        compaction=_compaction(r.child("compaction")),
        alarms=_alarms(r.child("alarms")),
    )
    r.finish()
    _cross_checks(env, problems)
    return env


def _cross_checks(env: EnvironmentConfig, problems: list[str]) -> None:
    """Rules that span sections; each names the field to change."""
    n = env.name
    if not env.source_names:
        problems.append(f"{n}.kinesis_streams: [] leaves no source: configure a Kinesis stream or set msk.mode")
    names = [s for s in env.source_names if s]
    if env.msk.enabled and env.msk.source_name in names[:-1]:
        problems.append(f"{n}.msk.source_name: {env.msk.source_name!r} is already a Kinesis stream name")
    if env.region is not None and env.account is None:
        problems.append(f"{n}.account: null must be set when region is set (both or neither)")
    if env.account is not None and env.region is None:
        problems.append(f"{n}.region: null must be set when account is set (both or neither)")
    if env.network.mode == "existing" and not env.msk.enabled:
        problems.append(
            f"{n}.network.mode: 'existing' names a VPC no job would use: only the MSK job runs in a VPC and "
            "msk.mode is 'none' (leave network.mode 'create'; no network is built without MSK)"
        )
    if env.network.mode == "existing" and env.region is None:
        problems.append(f"{n}.region: null must be set when network.mode is 'existing' (the VPC lives in one region)")
    if env.msk.mode == "provisioned" and isinstance(env.network.max_azs, int) and isinstance(env.msk.broker_count, int):
        azs = len(env.network.availability_zones) or env.network.max_azs
        if env.msk.broker_count % azs:
            problems.append(
                f"{n}.msk.broker_count: {env.msk.broker_count} must be a multiple of the {azs} availability zones"
            )
    streams = env.kinesis_streams
    alarms = env.alarms
    for s in streams:
        if isinstance(alarms.iterator_age_ms, int) and isinstance(s.retention_hours, int):
            if alarms.iterator_age_ms >= s.retention_hours * 3_600_000 // 2:
                problems.append(
                    f"{n}.alarms.iterator_age_ms: {alarms.iterator_age_ms} must be under half of stream "
                    f"{s.name!r} retention ({s.retention_hours} h = {s.retention_hours * 3_600_000} ms): "
                    "the alarm has to fire while there is still time to catch up"
                )
    sj = env.streaming
    if isinstance(sj.window_size_seconds, int) and isinstance(alarms.no_records_minutes, int):
        if alarms.no_records_minutes * 60 < 2 * sj.window_size_seconds:
            problems.append(
                f"{n}.alarms.no_records_minutes: {alarms.no_records_minutes} must cover at least two windows "
                f"(streaming.window_size_seconds is {sj.window_size_seconds})"
            )
    _compaction_schedule_checks(n, env.compaction, problems)
    _glue_version_checks(n, env, problems)
    allowed = streaming_worker_types(n)
    if sj.worker_type in STREAMING_WORKER_TYPES and sj.worker_type not in allowed:
        problems.append(
            f"{n}.streaming.worker_type: {sj.worker_type!r} is for low-volume streams; {n} must use "
            f"{' or '.join(allowed)}"
        )


def _glue_version_checks(n: str, env: EnvironmentConfig, problems: list[str]) -> None:
    """Each job kind takes the Glue versions AWS documents for it and whose Spark line is tested here."""
    for section, version, allowed, kind in (
        ("streaming", env.streaming.glue_version, STREAMING_GLUE_VERSIONS, "streaming (gluestreaming)"),
        ("compaction", env.compaction.glue_version, BATCH_GLUE_VERSIONS, "batch (glueetl)"),
    ):
        if version not in RUNTIMES or version in allowed:
            continue  # an unknown version is already reported
        runtime = RUNTIMES[version]
        if section == "streaming" and not runtime.streaming:
            why = "AWS documents no streaming jobs on it"
        elif runtime.spark not in LOCAL_SPARK_LINES:
            why = f"its Spark line {runtime.spark} is not among the lines make test runs the job code on"
        else:
            why = "it is not allowed"
        problems.append(
            f"{n}.{section}.glue_version: {version!r} is not allowed for {kind} jobs: {why} "
            f"(allowed: {', '.join(allowed)}; infra/runtimes.py lists each version with its citations)"
        )


def _compaction_schedule_checks(n: str, c: CompactionConfig, problems: list[str]) -> None:
    """A run must end before the next trigger: with MaxConcurrentRuns 1 a trigger that finds a run still
    going fails its own run (and the failure alarm pages). Its latest end is the start wait of its
    execution class plus timeout_minutes."""
    if not isinstance(c.schedule, str) or not _CRON_RE.match(c.schedule):
        return  # already reported
    interval = schedule_interval_minutes(c.schedule)
    if interval is None:
        problems.append(
            f"{n}.compaction.schedule: {c.schedule!r} is not a supported shape: a fixed minute and every hour or "
            "every N hours (N dividing 24), like 'cron(15 * * * ? *)' or 'cron(15 */2 * * ? *)'"
        )
        return
    if not isinstance(c.timeout_minutes, int) or not isinstance(c.flex, bool):
        return
    wait = COMPACTION_START_WAIT_MINUTES[c.flex]
    latest_end = wait + c.timeout_minutes + COMPACTION_SCHEDULE_MARGIN_MINUTES
    if latest_end > interval:
        problems.append(
            f"{n}.compaction.timeout_minutes: {c.timeout_minutes} is too long for a run every {interval} minutes: "
            f"a {'Flex' if c.flex else 'Standard'} run may wait {wait} minutes to start, so the timeout must be at "
            f"most {interval - wait - COMPACTION_SCHEDULE_MARGIN_MINUTES} (the next trigger would find it running "
            "and fail)"
        )


def _deep_merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = _deep_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def parse_config(raw: Any, source: str = "") -> ProjectConfig:
    """Validate a decoded config document; raise ConfigError listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigError([f"(top level): {_fmt(raw)} must be an object"], source)
    unknown = sorted(set(raw) - {"project", "defaults", "environments", "$comment"})
    problems += [f"{k}: unknown top-level field; allowed: project, defaults, environments" for k in unknown]
    project = raw.get("project")
    if not isinstance(project, str) or not _NAME_RE.match(project):
        problems.append(f"project: {_fmt(project)} is not a lower-case name of 2-32 letters, digits and '-'")
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        problems.append(f"defaults: {_fmt(defaults)} must be an object")
        defaults = {}
    envs_raw = raw.get("environments")
    if not isinstance(envs_raw, dict) or not envs_raw:
        problems.append(f"environments: {_fmt(envs_raw)} must be an object with at least one environment")
        envs_raw = {}
    environments = {}
    for name, body in envs_raw.items():
        if body is not None and not isinstance(body, dict):
            problems.append(f"{name}: {_fmt(body)} must be an object")
            continue
        environments[name] = _environment(name, _deep_merge(defaults, body or {}), problems)
    if problems:
        raise ConfigError(problems, source)
    return ProjectConfig(project=project, environments=environments)


def load_config(path: Path | str | None = None) -> ProjectConfig:
    """Read and validate the environment configuration file (default: config/environments.json)."""
    path = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"(file): cannot read {path}: {exc.strerror}"], str(path)) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"(file): not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"], str(path)) from None
    return parse_config(raw, str(path))


def update_raw(raw: dict, env: str, dotted: str, value: Any) -> dict:
    """Return a copy of a raw config document with environments.<env>.<dotted> set (for tests and tools)."""
    doc = copy.deepcopy(raw)
    node = doc["environments"].setdefault(env, {})
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return doc


__all__: list[str] = [
    "ConfigError",
    "EnvironmentConfig",
    "ProjectConfig",
    "load_config",
    "parse_config",
    "update_raw",
]
