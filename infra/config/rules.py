"""Rules that span fields or sections of one environment; each problem names the field to change."""

from __future__ import annotations

import re

from infra.config.model import (
    _CRON_RE,
    STREAMING_WORKER_TYPES,
    CompactionConfig,
    EnvironmentConfig,
    streaming_worker_types,
)
from infra.runtimes import BATCH_GLUE_VERSIONS, LOCAL_SPARK_LINES, RUNTIMES, STREAMING_GLUE_VERSIONS

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


def _cross_checks(env: EnvironmentConfig, problems: list[str]) -> None:
    """Rules that span sections; each names the field to change."""
    n = env.name
    if not env.source_names:
        problems.append(f"{n}.kinesis_streams: [] leaves no source: configure a Kinesis stream or set msk.mode")
    kinesis = {s.name for s in env.kinesis_streams}
    for source in env.msk.source_names:
        if source in kinesis:
            problems.append(f"{n}.msk.source_name: {source!r} (a Kafka source) is already a Kinesis stream name")
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
    retention = env.msk.topic_retention_hours
    if env.msk.enabled and isinstance(alarms.consumer_lag_ms, int) and isinstance(retention, int):
        if alarms.consumer_lag_ms >= retention * 3_600_000 // 2:
            problems.append(
                f"{n}.alarms.consumer_lag_ms: {alarms.consumer_lag_ms} must be under half of the topic's retention "
                f"(msk.topic_retention_hours {retention} h = {retention * 3_600_000} ms): the alarm has to fire while "
                "there is still time to catch up"
            )
    sj = env.streaming
    if isinstance(sj.window_size_seconds, int) and isinstance(alarms.no_records_minutes, int):
        if alarms.no_records_minutes * 60 < 2 * sj.window_size_seconds:
            problems.append(
                f"{n}.alarms.no_records_minutes: {alarms.no_records_minutes} must cover at least two windows "
                f"(streaming.window_size_seconds is {sj.window_size_seconds})"
            )
    for dataset in env.table_formats:
        if dataset not in env.datasets:
            problems.append(
                f"{n}.table_formats: {dataset!r} is no dataset of this environment (its sources carry: "
                f"{', '.join(env.datasets)})"
            )
    _routed_stream_checks(n, env, problems)
    created = env.lake_formation.iceberg_tables_created
    for dataset in created:
        if dataset not in env.datasets:
            problems.append(
                f"{n}.lake_formation.iceberg_tables_created: {dataset!r} is no dataset of this environment "
                f"(its sources carry: {', '.join(env.datasets)})"
            )
    _compaction_schedule_checks(n, env.compaction, problems)
    _glue_version_checks(n, env, problems)
    allowed = streaming_worker_types(n)
    if sj.worker_type in STREAMING_WORKER_TYPES and sj.worker_type not in allowed:
        problems.append(
            f"{n}.streaming.worker_type: {sj.worker_type!r} is for low-volume streams; {n} must use "
            f"{' or '.join(allowed)}"
        )
    _streaming_job_checks(env, problems)


def _streaming_job_checks(env: EnvironmentConfig, problems: list[str]) -> None:
    """A declared job's own settings follow the rules of the environment's `streaming` block; a job that runs a Kafka
    source runs in the VPC (its Glue connection), so its Kinesis sources are reached from there."""
    n, allowed_workers = env.name, streaming_worker_types(env.name)
    for i, job in enumerate(env.streaming_jobs):
        where, js = f"{n}.streaming_jobs[{i}].streaming", job.settings
        if js.glue_version in RUNTIMES and js.glue_version not in STREAMING_GLUE_VERSIONS:
            problems.append(f"{where}.glue_version: {js.glue_version!r} is not allowed for streaming (gluestreaming) "
                            f"jobs (allowed: {', '.join(STREAMING_GLUE_VERSIONS)}; infra/runtimes.py)")
        if js.worker_type in STREAMING_WORKER_TYPES and js.worker_type not in allowed_workers:
            problems.append(f"{where}.worker_type: {js.worker_type!r} is for low-volume streams; {n} must use "
                            f"{' or '.join(allowed_workers)}")
        minutes = env.alarms.no_records_minutes
        if isinstance(js.window_size_seconds, int) and isinstance(minutes, int) and minutes * 60 < 2 * js.window_size_seconds:
            problems.append(f"{where}.window_size_seconds: {js.window_size_seconds} is more than half of "
                            f"alarms.no_records_minutes ({minutes}): the stall alarm must cover two windows")
        kafka = [s for s in job.sources if s in env.msk.source_names]
        kinesis = [s for s in job.sources if s not in env.msk.source_names]
        # A Glue job with a connection runs in its subnets; the network this project creates routes them out
        # through its NAT gateways (infra/network.py), the way to Kinesis's public endpoint it has (an interface VPC
        # endpoint is the other: Kinesis "Using Kinesis Data Streams with interface VPC endpoints").
        if kafka and kinesis and env.network.mode == "create" and env.network.nat_gateways == 0:
            problems.append(f"{n}.streaming_jobs[{i}].sources: Kafka source(s) {kafka} put the job in the VPC, and "
                            f"network.nat_gateways 0 leaves its Kinesis source(s) {kinesis} unreachable from there "
                            "(give the network a NAT gateway, or run them in separate jobs)")


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


def _routed_stream_checks(n: str, env: EnvironmentConfig, problems: list[str]) -> None:
    """A routed stream's (or topic's) datasets are Parquet ones here (its job writes each with glue_jobs/routed_batch.py, which
    the Glue entrypoint gives no Iceberg table yet)."""
    from glue_jobs import datasets

    known = datasets.names()
    for dataset in env.msk.datasets if env.msk.enabled else ():
        if dataset in known and env.table_format(dataset, datasets.load(dataset).table_format) == "iceberg":
            problems.append(f"{n}.msk.datasets: dataset {dataset!r} is Iceberg in this environment; a routed topic "
                            "carries Parquet datasets (give it a topic of its own)")
    for i, stream in enumerate(env.kinesis_streams):
        if stream.route is None:
            continue
        for dataset in stream.route.datasets:
            if dataset in known and env.table_format(dataset, datasets.load(dataset).table_format) == "iceberg":
                problems.append(f"{n}.kinesis_streams[{i}].route.values: dataset {dataset!r} is Iceberg in this "
                                "environment; a routed stream carries Parquet datasets (route it from a stream of its own)")
