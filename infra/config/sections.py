"""One reader per section of an environment: each field read with its allowed values, the rules within
the section, then the environment as a whole (the rules that span sections are in rules.py)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from infra.config.model import (
    _ACCOUNT_RE,
    _BOOTSTRAP_RE,
    _CIDR_RE,
    _CRON_RE,
    _DATASET_NAME_RE,
    _EMAIL_RE,
    _KAFKA_TOPIC_RE,
    _MAINTENANCE_RE,
    _MSK_ARN_RE,
    _NAME_RE,
    _REGION_RE,
    _SUBNET_ID_RE,
    _TAG_KEY_RE,
    _VPC_ID_RE,
    BATCH_WORKER_TYPES,
    KAFKA_STARTING_OFFSETS,
    KINESIS_CAPACITY_MODES,
    KINESIS_STARTING_POSITIONS,
    LOG_RETENTION_DAYS,
    MSK_KAFKA_VERSIONS,
    MSK_MODES,
    NETWORK_MODES,
    PROTECTED_ENVIRONMENTS,
    REMOVAL_POLICIES,
    STREAMING_WORKER_TYPES,
    TOPIC_COMPRESSION_TYPES,
    AlarmConfig,
    CompactionConfig,
    EnvironmentConfig,
    KinesisStreamConfig,
    LakeFormationConfig,
    MskConfig,
    NetworkConfig,
    ReadersConfig,
    RouteConfig,
    StorageConfig,
    StreamingJobConfig,
    StreamingJobGroup,
)
from infra.config.reader import _Reader
from infra.config.rules import _cross_checks
from infra.runtimes import RUNTIMES


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
        # S3 moves objects to Standard-IA only once they are 30 days old (S3 User Guide, "Transitioning objects using
        # Amazon S3 Lifecycle", constraints); null keeps the lake in Standard.
        lake_infrequent_access_days=r.integer("lake_infrequent_access_days", minimum=30, maximum=3650, optional=True),
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


def _dataset(r: _Reader) -> str:
    """A source's `dataset`: the name of a folder under datasets/ (glue_jobs.datasets, which checks its files)."""
    from glue_jobs import datasets

    known = datasets.names()
    return r.string("dataset", choices=known)


def _route(s: _Reader) -> RouteConfig | None:
    """A stream's `route`: {"field": a path, "values": {value: dataset}} (docs/datasets.md "One stream, several
    datasets"). The job's own route table checks the form (glue_jobs/decoding/routes.py RouteTable.of), and each
    dataset's newest schema must declare the field as a string or an enum holding the values routed to it."""
    from glue_jobs import datasets
    from glue_jobs.decoding.routes import RouteError, RouteTable

    found, value = s._take("route", None, required=False)
    if not found or value is None:
        return None
    where = f"{s.path}.route"
    if not isinstance(value, dict) or set(value) != {"field", "values"}:
        s.problems.append(f"{where}: {value!r} must be an object of exactly `field` (a path such as type or meta.type) "
                          "and `values` ({value: dataset})")
        return None
    try:
        table = RouteTable.of(value["field"], value["values"], field_key=f"{where}.field", values_key=f"{where}.values")
    except RouteError as error:
        s.problems.append(str(error))
        return None
    known = datasets.names()
    unknown = [d for d in table.datasets if d not in known]
    for dataset in unknown:
        s.problems.append(f"{where}.values: {dataset!r} is not a dataset (datasets/: {', '.join(known)})")
    if not unknown:
        s.problems.extend(f"{where}: {problem}" for problem in table.problems({d: datasets.load(d) for d in table.datasets}))
    return RouteConfig(table.field, table.routes)


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
            dataset=None if "route" in s.data else _dataset(s),
            route=_route(s),
        )
        if "route" in s.data and "dataset" in s.data:
            s.used.add("dataset")
            s.fail("dataset", s.data["dataset"], "must be left out of a routed stream: its `route` names its datasets")
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
        dataset=None if r.data.get("datasets") else _dataset(r),
        datasets=_msk_datasets(r),
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
        # Kafka's retention.ms takes -1 for "forever"; a finite retention is required here, the lag alarm needs it.
        topic_retention_hours=r.integer("topic_retention_hours", minimum=1, maximum=87_600),
        topic_compression_type=r.string("topic_compression_type", choices=TOPIC_COMPRESSION_TYPES),
        min_partitions=_min_partitions(r),
        partition_groups=None,
    )
    cfg = dataclasses.replace(cfg, partition_groups=_partition_groups(r, cfg))
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


def _msk_datasets(r: _Reader) -> tuple[str, ...]:
    """`msk.datasets`: the datasets a routed topic carries, each frame routed by its registry schema (docs/kafka.md
    "One topic, several datasets"); `dataset` is then null (the defaults give one). Absent, null or []: a topic of one
    `dataset`."""
    from glue_jobs import datasets

    found, value = r._take("datasets", None, required=False)
    if not found or value is None or value == []:
        return ()
    known = datasets.names()
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        r.fail("datasets", value, "must be a list of dataset names (the datasets the topic's frames are)")
        return ()
    for name in value:
        if name not in known:
            r.fail("datasets", name, f"is not a dataset (datasets/: {', '.join(known)})")
    for name in sorted({n for n in value if value.count(n) > 1}):
        r.fail("datasets", name, "is named more than once")
    dataset = r.string("dataset", optional=True)
    if dataset is not None:
        r.fail("dataset", dataset, "must be null when `datasets` is given: a topic of several datasets routes each frame "
               "to the dataset whose registry schema wrote it")
    return tuple(sorted(name for name in set(value) if name in known))


def _min_partitions(r: _Reader) -> int | str | None:
    found, value = r._take("min_partitions", "auto", required=True)
    if not found or value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        r.fail("min_partitions", value, "must be \"auto\", null or an integer in 1..10000")
    return value


def _partition_groups(r: _Reader, cfg: MskConfig) -> tuple[tuple[int, ...], ...] | None:
    """null (one job reads the whole topic) or a list of at least 2 lists of partition numbers, one streaming job
    each: disjoint, and together every partition of the topic (a partition no job reads would never reach the lake)."""
    found, value = r._take("partition_groups", None, required=False)
    if value is None:
        return None
    partitions = cfg.topic_partitions if isinstance(cfg.topic_partitions, int) else 0
    shape_ok = isinstance(value, list) and len(value) >= 2 and all(
        isinstance(g, list) and g and all(isinstance(p, int) and not isinstance(p, bool) for p in g) for g in value)
    if not shape_ok:
        r.fail("partition_groups", value, "must be null or a list of at least 2 non-empty lists of partition numbers")
        return None
    seen = [p for g in value for p in g]
    outside = sorted({p for p in seen if not 0 <= p < partitions})
    twice = sorted({p for p in seen if seen.count(p) > 1})
    missing = sorted(set(range(partitions)) - set(seen))
    if outside:
        r.fail("partition_groups", value, f"names partitions {outside} outside 0..{partitions - 1} (topic_partitions {partitions})")
    if twice:
        r.fail("partition_groups", value, f"names partitions {twice} in more than one group (two jobs would write them twice)")
    if missing:
        r.fail("partition_groups", value, f"leaves partitions {missing} to no job (their records would never be read)")
    longest = f"{cfg.source_name}-p{len(value) - 1}"
    if isinstance(cfg.source_name, str) and not _NAME_RE.match(longest):
        r.fail("partition_groups", value, f"makes source name {longest!r}, longer than a source name may be (2-32)")
    return tuple(tuple(sorted(g)) for g in value)


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
        iceberg_snapshot_retention_hours=r.integer("iceberg_snapshot_retention_hours", minimum=1, maximum=24 * 90),
    )
    r.finish()
    return cfg


def _readers(r: _Reader) -> ReadersConfig:
    cfg = ReadersConfig(
        # Athena's minimum per-query cutoff is 10 MB (BytesScannedCutoffPerQuery minimum 10000000, the
        # AWS::Athena::WorkGroup resource schema); at most 1 PB.
        bytes_scanned_cutoff_mb=r.integer("bytes_scanned_cutoff_mb", minimum=10, maximum=1_000_000_000),
        results_expiration_days=r.integer("results_expiration_days", minimum=1, maximum=3650),
    )
    r.finish()
    return cfg


def _lake_formation(r: _Reader) -> LakeFormationConfig:
    cfg = LakeFormationConfig(
        enabled=r.boolean("enabled"),
        iceberg_tables_created=r.string_list("iceberg_tables_created", pattern=_DATASET_NAME_RE,
                                             allowed="a dataset name (a folder under datasets/)"),
    )
    if len(set(cfg.iceberg_tables_created)) != len(cfg.iceberg_tables_created):
        r.fail("iceberg_tables_created", list(cfg.iceberg_tables_created), "names a dataset more than once")
    if cfg.enabled is False and cfg.iceberg_tables_created:
        r.fail("iceberg_tables_created", list(cfg.iceberg_tables_created),
               "has no effect while enabled is false (set enabled to true, or empty the list)")
    r.finish()
    return cfg


def _table_formats(r: _Reader) -> dict[str, str]:
    """`table_formats`: {dataset: table format} overriding the datasets' dataset.json in this environment (optional;
    which datasets the environment carries is checked with the other cross checks)."""
    _, formats = r._take("table_formats", {}, required=False)
    allowed = ("parquet", "iceberg")  # glue_jobs/dataset_contract.py TABLE_FORMATS
    if not isinstance(formats, dict):
        r.fail("table_formats", formats, 'must map dataset names to "parquet" or "iceberg"')
        return {}
    good = {}
    for dataset, value in formats.items():
        if not isinstance(dataset, str) or not _DATASET_NAME_RE.match(dataset):
            r.fail("table_formats", dataset, "is not a dataset name (a folder under datasets/)")
        elif value not in allowed:
            r.fail(f"table_formats.{dataset}", value, f"is not one of {', '.join(allowed)}")
        else:
            good[dataset] = value
    return good


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
        freshness_minutes=r.integer("freshness_minutes", minimum=5, maximum=10080),
        # null turns the alarm off (an environment nobody produces to, like dev). One evaluation period of this
        # length: PutMetricAlarm allows Period x EvaluationPeriods up to 604,800 s (CloudWatch API reference,
        # PutMetricAlarm "Period"); a day is plenty for "no data".
        no_data_minutes=r.integer("no_data_minutes", minimum=5, maximum=1440, optional=True),
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
        readers=_readers(r.child("readers")),
        lake_formation=_lake_formation(r.child("lake_formation")),
        table_formats=_table_formats(r),
    )
    env = dataclasses.replace(env, streaming_jobs=_streaming_jobs(r, env))
    r.finish()
    _cross_checks(env, problems)
    return env


def _streaming_jobs(r: _Reader, env: EnvironmentConfig) -> tuple[StreamingJobGroup, ...]:
    """`streaming_jobs`: [{"name", "sources": [source names], "streaming": {keys of the streaming block}}]. A job's
    `streaming` is laid over the environment's (so it names only what differs); its problems are reported under the
    job's path, those of a value it inherits only once, under `streaming`."""
    found, value = r._take("streaming_jobs", [], required=False)
    if not isinstance(value, list):
        r.fail("streaming_jobs", value, "must be a list of job objects")
        return ()
    inherited = r.data.get("streaming") if isinstance(r.data.get("streaming"), dict) else {}
    jobs = []
    for i, item in enumerate(value):
        j = _Reader(item, f"{r.path}.streaming_jobs[{i}]", r.problems)
        name = j.string("name", pattern=_NAME_RE, allowed="a lower-case name of 2-32 letters, digits and '-'")
        sources = j.string_list("sources", pattern=_NAME_RE, allowed="a source name", min_items=1)
        _, overrides = j._take("streaming", {}, required=False)
        if not isinstance(overrides, dict):
            j.fail("streaming", overrides, "must be an object of streaming settings (keys of the environment's `streaming`)")
            overrides = {}
        own: list[str] = []
        settings = _streaming(_Reader({**inherited, **overrides}, f"{j.path}.streaming", own))
        prefix = f"{j.path}.streaming."
        r.problems.extend(p for p in own if p[len(prefix):].split(":")[0] in overrides or "unknown field" in p)
        j.finish()
        jobs.append(StreamingJobGroup(name=name, sources=sources, settings=settings))
    known = set(env.source_names)
    owner: dict[str, str] = {}
    names = [job.name for job in jobs]
    for i, job in enumerate(jobs):
        where = f"{r.path}.streaming_jobs[{i}]"
        if job.name is not None and names.count(job.name) > 1:
            r.problems.append(f"{where}.name: {job.name!r} names more than one job")
        if job.name in known and job.name not in job.sources:
            r.problems.append(f"{where}.name: {job.name!r} is the name of source {job.name!r}, which this job does not "
                              "run (a job named after a source is that source's job)")
        for source in job.sources:
            if source not in known:
                if not known:
                    continue  # an environment without sources is told so once (its sources' check)
                r.problems.append(f"{where}.sources: {source!r} is no source of this environment (sources: "
                                  f"{', '.join(env.source_names) or 'none'})")
            elif source in owner:
                r.problems.append(f"{where}.sources: {source!r} is also in job {owner[source]!r} (a source runs in one "
                                  "job: two would write one checkpoint)")
            else:
                owner[source] = job.name
    return tuple(jobs)
