"""Every alarm, the dashboard and the notification topic of one environment.

The construct receives the other units' names and builds all signals here, so there is one place to
read what is watched. Each metric carries exactly the dimensions AWS (or the jobs) publish it with;
an alarm on a metric without its dimensions watches nothing. Runbook: docs/monitoring.md "Runbook".
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

# Custom metrics the jobs publish: their names come from the jobs' own metric modules, so an alarm cannot
# watch a name no job sends.
from compaction.metrics import DURATION as COMPACTION_DURATION
from compaction.metrics import FILES_AFTER as COMPACTION_FILES_AFTER
from compaction.metrics import FILES_BEFORE as COMPACTION_FILES_BEFORE
from compaction.metrics import LAKE_BYTES as COMPACTION_LAKE_BYTES
from compaction.metrics import LAKE_FILES as COMPACTION_LAKE_FILES
from compaction.metrics import SUCCEEDED as COMPACTION_SUCCEEDED
from glue_jobs.metrics import (
    ARRIVAL_LAG_MS,
    DEAD_LETTERS,
    NEWEST_EVENT_AGE_SECONDS,
    RECORDS_IN,
    RECORDS_WRITTEN,
    UNROUTABLE_RECORDS,
)
from glue_jobs.metrics import BATCH_DURATION_MS as BATCH_DURATION
from glue_jobs.metrics import METRICS_NAMESPACE as APP_NAMESPACE
from infra.config import AlarmConfig
from infra.constants import pascal

# Glue job metrics: namespace Glue, dimensions JobName, JobRunId=ALL, Type
# (https://docs.aws.amazon.com/glue/latest/dg/monitoring-awsglue-with-cloudwatch-metrics.html).
GLUE_CONSUMER_LAG = "glue.driver.streaming.maxConsumerLagInMs"
GLUE_EXECUTORS = "glue.driver.ExecutorAllocationManager.executors.numberAllExecutors"
GLUE_FAILED_TASKS = "glue.driver.aggregate.numFailedTasks"
GLUE_KILLED_TASKS = "glue.driver.aggregate.numKilledTasks"
GLUE_BYTES_READ = "glue.driver.aggregate.bytesRead"
GLUE_BYTES_WRITTEN = "glue.ALL.s3.filesystem.write_bytes"
ONE_MINUTE = cdk.Duration.minutes(1)
FIVE_MINUTES = cdk.Duration.minutes(5)
# Throughput-exceeded: a few throttled calls are normal retries; alarm when 3 of 5 minutes throttle.
THROTTLE_DATAPOINTS, THROTTLE_PERIODS = 3, 5
# A provisioned stream alarms when it uses more than this share of its shards' capacity (issue 34: AWS's advice).
CAPACITY_PERCENT = 80


@dataclass(frozen=True)
class StreamingJobSignals:
    source_name: str
    job_name: str
    source_type: str  # kinesis | kafka
    stream_name: str | None  # the Kinesis stream it reads, if any
    retention_ms: int | None = None  # a Kafka source's topic retention (retention.ms): lag past half of it alarms
    source_retention_hours: int | None = None  # the stream's or topic's retention: an outage past half of it alarms
    job_key: str | None = None  # the job's name in the config (None: the source's, a job of its own)
    shared: bool = False  # the job runs other sources too (its Glue metrics are the job's, not this source's)
    window_size_seconds: int | None = None  # the job's window (None: the environment's)
    job_retention_hours: int | None = None  # the shortest retention of the job's sources (None: this source's)

    @property
    def job_alarm_key(self) -> str:
        """The id part of the job's own alarms (NotRunning..., RestartsCapped...): one set per job."""
        return pascal(self.job_key or self.source_name)


@dataclass(frozen=True)
class MskSignals:
    cluster_name: str
    broker_count: int


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        environment: str,
        alarms: AlarmConfig,
        window_size_seconds: int,
        notification_emails: tuple[str, ...],
        stream_names: dict[str, str],
        provisioned_shards: dict[str, int] | None = None,  # stream -> shard count, provisioned streams only
        streaming_jobs: list[StreamingJobSignals],
        datasets: dict[str, tuple[str, ...]],  # dataset -> the sources that feed it
        compaction_job_name: str,
        routed_sources: tuple[str, ...] = (),  # sources whose records are several datasets, routed by a field
        msk: MskSignals | None,
        removal_policy: cdk.RemovalPolicy,
        keeper_function_name: str | None = None,
        athena_workgroup: str | None = None,
        lake_bucket_name: str | None = None,
    ) -> None:
        super().__init__(scope, id_)
        self.environment = environment
        self.settings = alarms
        self.alarms: dict[str, cw.Alarm] = {}
        self.datasets = datasets
        self.routed_sources = routed_sources

        self.topic_key = kms.Key(
            self, "TopicKey", enable_key_rotation=True, removal_policy=removal_policy, description="Alarm topic"
        )
        # Alarms publish to an encrypted topic only if they may use its key, with the source keys the SNS Developer
        # Guide's "Key management" asks for ("Add the aws:SourceAccount and aws:SourceArn condition keys to the KMS
        # resource policy"; its exception is EventBridge, below). That CloudWatch's KMS request carries them is not
        # shown by any AWS page for CloudWatch itself: docs/operations.md "Alarm delivery" says how to settle it.
        # In a key policy "*" means this key.
        stack = cdk.Stack.of(self)
        alarms_of_this_account = f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"
        self.topic_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": stack.account},
                            "ArnLike": {"aws:SourceArn": alarms_of_this_account}},
            )
        )
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name=f"streamlake {environment} alarms", master_key=self.topic_key, enforce_ssl=True
        )
        # A topic policy replaces the topic's default policy, so CloudWatch may publish only if it says so: "Allow_Publish_
        # Alarms", principal cloudwatch.amazonaws.com, sns:Publish, aws:SourceArn the alarms' ARN (AWS Knowledge Center
        # "Why didn't I receive an SNS notification for my CloudWatch alarm trigger?"). Without it every alarm's
        # history reads "not authorized to perform: SNS:Publish" and nobody is told. The alarm ARN names this account.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnLike": {"aws:SourceArn": alarms_of_this_account}},
            )
        )
        # EventBridge's statements (sns:Publish in the topic policy, Decrypt and GenerateDataKey* in the key policy) come
        # from its target (aws_events_targets.SnsTopic), both without conditions, as documented: "You can't use
        # Condition blocks in Amazon SNS topic policies for EventBridge" (EventBridge "Amazon SNS permissions"), and
        # "Adding the aws:SourceAccount, aws:SourceArn, and aws:SourceOrgID to a AWS KMS policy is not supported for
        # EventBridge-to-encrypted topics" (SNS "Key management").
        for email in notification_emails:
            self.topic.add_subscription(subs.EmailSubscription(email))
        self._action = cw_actions.SnsAction(self.topic)

        for name, stream_name in sorted(stream_names.items()):
            self._kinesis_alarms(name, stream_name)
            if name in (provisioned_shards or {}):
                self._shard_capacity_alarm(name, stream_name, provisioned_shards[name])
        kept: set[str] = set()
        for job in streaming_jobs:
            if job.job_alarm_key not in kept:  # the job keeper's alarms, once per job whatever sources it runs
                kept.add(job.job_alarm_key)
                self._keeper_alarms(job)
            self._streaming_job_alarms(job, job.window_size_seconds or window_size_seconds)
        for dataset, sources in datasets.items():
            self._freshness_alarm(dataset)
            self._dead_letter_alarm(dataset, sources)
            self._no_data_alarm(dataset, sources)
        for source in routed_sources:
            self._unroutable_alarm(source)
        if msk is not None:
            self._msk_alarms(msk)
        self._compaction_alarm(compaction_job_name)
        if keeper_function_name is not None:
            self._keeper_function_alarms(keeper_function_name)
        self._job_failure_rule(list(dict.fromkeys(j.job_name for j in streaming_jobs)) + [compaction_job_name])
        self.dashboard = self._dashboard(stream_names, streaming_jobs, window_size_seconds, compaction_job_name,
                                         athena_workgroup, lake_bucket_name)

    # ---- alarms -------------------------------------------------------------------------------

    def _alarm(self, key: str, *, metric: cw.IMetric, threshold: float, periods: int, description: str,
               comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD, datapoints: int | None = None,
               missing=cw.TreatMissingData.NOT_BREACHING) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            key,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=f"[{self.environment}] {description} Runbook: docs/monitoring.md#runbook",
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms[key] = alarm
        return alarm

    def _kinesis_alarms(self, name: str, stream_name: str) -> None:
        dims = {"StreamName": stream_name}
        s = self.settings
        self._alarm(
            f"IteratorAge{pascal(name)}",
            metric=cw.Metric(namespace="AWS/Kinesis", metric_name="GetRecords.IteratorAgeMilliseconds",
                             dimensions_map=dims, statistic="Maximum", period=ONE_MINUTE),
            threshold=s.iterator_age_ms,
            periods=s.iterator_age_evaluation_periods,
            description=f"Kinesis {name}: oldest unread record is older than {s.iterator_age_ms} ms; the job is falling behind.",
        )
        for direction in ("Read", "Write"):
            self._alarm(
                f"{direction}Throttled{pascal(name)}",
                metric=cw.Metric(namespace="AWS/Kinesis", metric_name=f"{direction}ProvisionedThroughputExceeded",
                                 dimensions_map=dims, statistic="Sum", period=ONE_MINUTE),
                threshold=0,
                periods=THROTTLE_PERIODS,
                datapoints=THROTTLE_DATAPOINTS,
                description=f"Kinesis {name}: {direction.lower()} calls throttled in {THROTTLE_DATAPOINTS} of {THROTTLE_PERIODS} minutes.",
            )

    def _shard_capacity_alarm(self, name: str, stream_name: str, shards: int) -> None:
        """The share of a provisioned stream's capacity in use: per minute, the highest of bytes in against 1 MiB/s per
        shard, records in against 1,000/s per shard and bytes read against 2 MiB/s per shard (Kinesis Data Streams
        quotas and limits), in percent; above CAPACITY_PERCENT for 5 minutes, add shards before writes throttle."""
        dims = {"StreamName": stream_name}

        def metric(metric_name: str) -> cw.Metric:
            return cw.Metric(namespace="AWS/Kinesis", metric_name=metric_name, dimensions_map=dims, statistic="Sum",
                             period=ONE_MINUTE)

        seconds = 60
        usage = cw.MathExpression(
            expression=(f"100 * MAX([bytes_in / {shards * 1_048_576 * seconds}, records_in / {shards * 1000 * seconds}, "
                        f"bytes_out / {shards * 2 * 1_048_576 * seconds}])"),
            using_metrics={"bytes_in": metric("IncomingBytes"), "records_in": metric("IncomingRecords"),
                           "bytes_out": metric("GetRecords.Bytes")},
            period=ONE_MINUTE, label="share of shard capacity (%)",
        )
        self._alarm(
            f"ShardCapacity{pascal(name)}", metric=usage, threshold=CAPACITY_PERCENT, periods=5,
            description=f"Kinesis {name}: more than {CAPACITY_PERCENT}% of its {shards} shards' write or read capacity in "
                        "use for 5 minutes; raise shard_count before producers are throttled.",
        )

    def _app_metric(self, name: str, source: str | None, statistic: str = "Sum", period=ONE_MINUTE) -> cw.Metric:
        dims = {"Environment": self.environment}
        if source is not None:
            dims["Source"] = source
        return cw.Metric(namespace=APP_NAMESPACE, metric_name=name, dimensions_map=dims, statistic=statistic, period=period)

    def _glue_metric(self, name: str, job_name: str, statistic: str = "Maximum", type_: str = "gauge",
                     period=ONE_MINUTE) -> cw.Metric:
        return cw.Metric(namespace="Glue", metric_name=name, statistic=statistic, period=period,
                         dimensions_map={"JobName": job_name, "JobRunId": "ALL", "Type": type_})

    def _lag_metric(self, job: StreamingJobSignals, period=ONE_MINUTE) -> cw.Metric:
        """A job's consumer lag. Kinesis jobs: Glue's maxConsumerLagInMs (emitConsumerLagMetrics of Glue's Kinesis
        reader). Kafka jobs read with Spark's Kafka source, for which Glue emits nothing (the option belongs to
        Glue's reader): the job's own ArrivalLagMs, processing time minus the batch's earliest record timestamp,
        what Glue's metric measures ("the duration between the oldest record received by the topic and the time
        it arrives in AWS Glue", Glue Kafka connection option reference).
        The name: Glue API KinesisStreamingSourceOptions.EmitConsumerLagMetrics ("The metric's name is
        glue.driver.streaming.maxConsumerLagInMs"); JobName and JobRunId "ALL": Glue "Visualizing AWS Glue streaming
        metrics" filters by them. Type "gauge" is on no AWS page: unverified, listed in docs/operations.md "What only AWS
        can show" with the `aws cloudwatch list-metrics` command that settles it."""
        if job.stream_name is None or job.shared:
            # In a job of several sources Glue's metric is the job's (no dimension names the source): a source's own
            # lag is the job's per-source ArrivalLagMs (glue_jobs/metrics.py).
            return self._app_metric(ARRIVAL_LAG_MS, job.source_name, statistic="Maximum", period=period)
        return self._glue_metric(GLUE_CONSUMER_LAG, job.job_name, period=period)

    def _keeper_alarms(self, job: StreamingJobSignals) -> None:
        """From the job keeper's metrics (infra/functions/job_keeper/handler.py), published every 5 minutes per job."""
        dims = {"JobName": job.job_name}
        self._alarm(
            f"NotRunning{job.job_alarm_key}",
            metric=cw.Metric(namespace=APP_NAMESPACE, metric_name="JobNotRunning", dimensions_map=dims,
                             statistic="Minimum", period=FIVE_MINUTES),
            threshold=1, periods=3, comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # No data: the keeper itself stopped reporting, and nothing then notices a stopped job.
            missing=cw.TreatMissingData.BREACHING,
            description=f"Streaming job {job.job_name} ({job.job_key or job.source_name}) has had no active run for 15 minutes (failed, "
                        "stopped, timed out, held by `job stop`, or never started), or the job keeper stopped reporting.",
        )
        self._alarm(
            f"RestartsCapped{job.job_alarm_key}",
            metric=cw.Metric(namespace=APP_NAMESPACE, metric_name="RestartsCapped", dimensions_map=dims,
                             statistic="Maximum", period=FIVE_MINUTES),
            threshold=1, periods=1, comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            description=f"Streaming job {job.job_name} ({job.job_key or job.source_name}) failed again after its restarts of the last "
                        "hour; the job keeper stopped restarting it. Fix the cause, then `job start`.",
        )
        retention_hours = job.job_retention_hours or job.source_retention_hours
        if retention_hours is not None:
            half = retention_hours * 3600 // 2
            self._alarm(
                f"OutagePastHalfRetention{job.job_alarm_key}",
                metric=cw.Metric(namespace=APP_NAMESPACE, metric_name="DownSeconds", dimensions_map=dims,
                                 statistic="Maximum", period=FIVE_MINUTES),
                threshold=half, periods=1, comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                description=f"Streaming job {job.job_name} ({job.job_key or job.source_name}) has been down for half of its "
                            + (f"source's {retention_hours} h retention" if job.job_key is None else
                               f"sources' shortest retention, {retention_hours} h")
                            + ": records it has not read start to expire unread at "
                            "the full retention (docs/operations.md \"Expired positions\"). Start it now.",
            )

    def _streaming_job_alarms(self, job: StreamingJobSignals, window_size_seconds: int) -> None:
        s = self.settings
        key = pascal(job.source_name)
        lag = self._lag_metric(job)
        self._alarm(
            f"ConsumerLag{key}",
            metric=lag,
            threshold=s.consumer_lag_ms,
            periods=3,
            description=f"Job {job.source_name}: consumer lag above {s.consumer_lag_ms} ms for 3 minutes.",
        )
        self._alarm(
            f"BatchOverrun{key}",
            metric=self._app_metric(BATCH_DURATION, job.source_name, statistic="Maximum"),
            threshold=window_size_seconds * 1000,
            periods=s.batch_overrun_evaluation_periods,
            description=f"Job {job.source_name}: micro-batches take longer than the {window_size_seconds} s window.",
        )
        if job.retention_ms is not None:
            # Offsets older than the retention are deleted, and the job then fails (failOnDataLoss=true, docs/kafka.md
            # "Expired offsets"): at half of it there is still as much time left as the job has already lost.
            # ArrivalLagMs exists only while batches run; a job that is down is the liveness alarms' to report.
            self._alarm(
                f"LagPastHalfRetention{key}",
                metric=lag,
                threshold=job.retention_ms // 2,
                periods=1,
                description=f"Job {job.source_name}: its oldest unread record is older than half the topic's retention "
                            f"({job.retention_ms // 2} ms); records past the retention are deleted before it reads them.",
            )
        minutes = s.no_records_minutes
        if job.stream_name is not None:
            incoming = cw.Metric(namespace="AWS/Kinesis", metric_name="IncomingRecords", statistic="Sum",
                                 dimensions_map={"StreamName": job.stream_name}, period=cdk.Duration.minutes(minutes))
        else:
            # Spark consumers commit no offsets, so MSK's consumer-group lag cannot see them; the job's own
            # lag metric says whether data is waiting.
            incoming = self._lag_metric(job, period=cdk.Duration.minutes(minutes))
        processed = self._app_metric(RECORDS_IN, job.source_name, period=cdk.Duration.minutes(minutes))
        stalled = cw.MathExpression(
            expression="IF(FILL(incoming, 0) > 0 AND FILL(processed, 0) == 0, 1, 0)",
            using_metrics={"incoming": incoming, "processed": processed},
            label=f"{job.source_name} stalled",
            period=cdk.Duration.minutes(minutes),
        )
        self._alarm(
            f"NoRecordsProcessed{key}",
            metric=stalled,
            threshold=1,
            periods=1,
            comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            description=f"Job {job.source_name}: source has data but nothing was processed for {minutes} minutes.",
        )

    def _source_part(self, name: str, source: str, dataset: str, period: cdk.Duration) -> cw.Metric:
        """The dataset's share of source's metric `name`: the source's own when it carries one dataset, its part's
        (dimensions Source, Dataset, Environment: glue_jobs/metrics.py) when it is routed."""
        if source not in self.routed_sources:
            return self._app_metric(name, source, period=period)
        return cw.Metric(namespace=APP_NAMESPACE, metric_name=name, statistic="Sum", period=period,
                         dimensions_map={"Environment": self.environment, "Source": source, "Dataset": dataset})

    def _sum_of(self, name: str, sources: tuple[str, ...], ids: str, period: cdk.Duration,
                dataset: str = "") -> tuple[str, dict[str, cw.IMetric]]:
        """A math expression summing the metric `name` of a dataset over its sources (one source: its id alone)."""
        if len(sources) == 1:
            return ids, {ids: self._source_part(name, sources[0], dataset, period)}
        metrics = {f"{ids}{i}": self._source_part(name, source, dataset, period) for i, source in enumerate(sources)}
        return "(" + " + ".join(f"FILL({key}, 0)" for key in metrics) + ")", metrics

    def _unroutable_alarm(self, source: str) -> None:
        """The share of a routed source's records no route took (its unroutable dead letters: a producer's new type
        no dataset claims, a record without the field), over the dead-letter threshold for 10 minutes."""
        self._percent_alarm(
            f"UnroutableShare{pascal(source)}",
            expression="IF(FILL(records, 0) > 0, 100 * FILL(unroutable, 0) / records, 0)",
            using={"records": self._app_metric(RECORDS_IN, source, period=FIVE_MINUTES),
                   "unroutable": self._app_metric(UNROUTABLE_RECORDS, source, period=FIVE_MINUTES)},
            label=f"{source} unroutable %",
            description=f"Routed source {source}: more than {self.settings.dead_letter_percent}% of records went to no "
                        "dataset for 10 minutes (its dead letters, reason unroutable, say which values).",
        )

    def _percent_alarm(self, key: str, *, expression: str, using: dict[str, cw.IMetric], label: str,
                       description: str) -> None:
        """A share in percent over 5 minutes, above `dead_letter_percent` for two periods."""
        rate = cw.MathExpression(expression=expression, using_metrics=using, label=label, period=FIVE_MINUTES)
        self._alarm(key, metric=rate, threshold=self.settings.dead_letter_percent, periods=2, description=description)

    def _dead_letter_alarm(self, dataset: str, sources: tuple[str, ...]) -> None:
        """The share of the dataset's records dead-lettered, over all its sources (one source: that source's share,
        with the expression and ids this alarm had when it was per source)."""
        records, using = self._sum_of(RECORDS_IN, sources, "records", FIVE_MINUTES, dataset)
        dead, dead_using = self._sum_of(DEAD_LETTERS, sources, "dead", FIVE_MINUTES, dataset)
        filled = f"FILL({records}, 0)" if len(sources) == 1 else records
        dead_filled = f"FILL({dead}, 0)" if len(sources) == 1 else dead
        self._percent_alarm(
            f"DeadLetterRate{pascal(dataset)}",
            expression=f"IF({filled} > 0, 100 * {dead_filled} / {records}, 0)",
            using={**using, **dead_using},
            label=f"{dataset} dead-letter %",
            description=f"Dataset {dataset} ({', '.join(sources)}): more than {self.settings.dead_letter_percent}% of "
                        "records dead-lettered for 10 minutes.",
        )

    def _no_data_alarm(self, dataset: str, sources: tuple[str, ...]) -> None:
        """No record read by any source of the dataset for `no_data_minutes`: producers stopped, or every job is
        down. Missing data breaches (a job that does not run publishes nothing). Off when the setting is null."""
        minutes = self.settings.no_data_minutes
        if minutes is None:
            return
        period = cdk.Duration.minutes(minutes)
        records, using = self._sum_of(RECORDS_IN, sources, "records", period, dataset)
        self._alarm(
            f"NoData{pascal(dataset)}",
            metric=cw.MathExpression(expression=f"FILL({records}, 0)" if len(sources) == 1 else records,
                                     using_metrics=using, label=f"{dataset} records read", period=period),
            threshold=1,
            periods=1,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cw.TreatMissingData.BREACHING,
            description=f"Dataset {dataset} ({', '.join(sources)}): no record read for {minutes} minutes.",
        )

    def _freshness_alarm(self, dataset: str) -> None:
        """How far the newest event time written lags behind the batch that wrote it, per dataset: the minimum
        over its sources in 5 minutes (the freshest source). No batch writing rows publishes nothing, which is
        not breaching: a quiet hour is not stale data, and a stalled job has NoRecordsProcessed."""
        minutes = self.settings.freshness_minutes
        age = cw.Metric(namespace=APP_NAMESPACE, metric_name=NEWEST_EVENT_AGE_SECONDS, statistic="Minimum", period=FIVE_MINUTES,
                        dimensions_map={"Dataset": dataset, "Environment": self.environment})
        self._alarm(
            f"Freshness{pascal(dataset)}",
            metric=age,
            threshold=minutes * 60,
            periods=2,
            description=f"Dataset {dataset}: the newest event time written lags more than {minutes} minutes behind, for 10 minutes.",
        )

    def _msk_alarms(self, msk: MskSignals) -> None:
        for broker in range(1, msk.broker_count + 1):
            self._alarm(
                f"MskDiskUsedBroker{broker}",
                metric=cw.Metric(namespace="AWS/Kafka", metric_name="KafkaDataLogsDiskUsed", statistic="Maximum",
                                 period=FIVE_MINUTES,
                                 dimensions_map={"Cluster Name": msk.cluster_name, "Broker ID": str(broker)}),
                threshold=self.settings.msk_disk_used_percent,
                periods=3,
                description=f"MSK broker {broker}: data log disk above {self.settings.msk_disk_used_percent}%.",
            )

    def _compaction_alarm(self, job_name: str) -> None:
        hours = self.settings.compaction_missed_hours
        self._alarm(
            "CompactionNotSucceeding",
            metric=self._app_metric(COMPACTION_SUCCEEDED, None, period=cdk.Duration.hours(1)),
            threshold=1,
            periods=hours,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cw.TreatMissingData.BREACHING,
            description=f"Compaction job {job_name} has not succeeded for {hours} hours.",
        )

    def _job_failure_rule(self, job_names: list[str]) -> None:
        self.job_failure_rule = events.Rule(
            self,
            "GlueJobFailed",
            description="Any streaming or compaction job run that fails, times out or errors",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                # Not STOPPED: every deploy that changes a streaming job stops its run on purpose (the job keeper), and a
                # notice per deploy teaches people to ignore this topic. A streaming job that stays stopped is the
                # NotRunning alarm's (15 minutes without a run). ERROR is a job run status (Glue "job run statuses").
                detail={"state": ["FAILED", "TIMEOUT", "ERROR"], "jobName": job_names},
            ),
        )
        self.job_failure_rule.add_target(targets.SnsTopic(self.topic))

    def _keeper_function_alarms(self, function_name: str) -> None:
        """The job keeper's own failures. CloudFormation invokes it asynchronously ("CloudFormation invokes your Lambda
        function asynchronously with an event that includes a callback URL", CloudFormation "Lambda-backed custom
        resources"), and so do EventBridge's rules: an invocation that errors, or that Lambda drops after its retries
        (AsyncEventsDropped, Lambda "Monitoring asynchronous invocation"), reaches no job. A dropped deploy also fails
        the stack update after the deploy resource's ServiceTimeout (infra/job_keeper.SERVICE_TIMEOUT)."""
        dims = {"FunctionName": function_name}
        for metric_name, what in (("Errors", "returned an error"), ("AsyncEventsDropped", "dropped an event unprocessed")):
            self._alarm(
                f"JobKeeper{metric_name}",
                metric=cw.Metric(namespace="AWS/Lambda", metric_name=metric_name, dimensions_map=dims, statistic="Sum",
                                 period=FIVE_MINUTES),
                threshold=0, periods=1,
                description=f"The job keeper ({function_name}) {what}: a deploy, a schedule tick or a job's state change "
                            "may not have reached its job. Read its log group; `streamlake job status` shows each job.",
            )

    # ---- dashboard ----------------------------------------------------------------------------

    def _dashboard(self, stream_names, jobs, window_size_seconds, compaction_job_name, athena_workgroup,
                   lake_bucket_name) -> cw.Dashboard:
        dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.hours(3))
        for job in jobs:
            title = f"{job.source_name} ({job.source_type})"
            incoming = (
                [cw.Metric(namespace="AWS/Kinesis", metric_name="IncomingRecords", statistic="Sum", period=ONE_MINUTE,
                           dimensions_map={"StreamName": job.stream_name}, label="incoming")]
                if job.stream_name else []
            )
            dashboard.add_widgets(
                cw.GraphWidget(title=f"{title}: input vs processed records/min", width=8,
                               left=incoming + [self._app_metric(RECORDS_IN, job.source_name).with_(label="processed"),
                                                self._app_metric(RECORDS_WRITTEN, job.source_name).with_(label="written")]),
                cw.GraphWidget(title=f"{title}: lag (ms)", width=8,
                               left=[self._lag_metric(job).with_(label="consumer lag")]
                               + ([cw.Metric(namespace="AWS/Kinesis", metric_name="GetRecords.IteratorAgeMilliseconds",
                                             statistic="Maximum", period=ONE_MINUTE,
                                             dimensions_map={"StreamName": job.stream_name}, label="iterator age")]
                                  if job.stream_name else [])),
                cw.GraphWidget(title=f"{title}: batch duration vs window (ms)", width=8,
                               left=[self._app_metric(BATCH_DURATION, job.source_name, statistic="Maximum")],
                               left_annotations=[cw.HorizontalAnnotation(value=window_size_seconds * 1000, label="window")]),
            )
            dashboard.add_widgets(
                cw.GraphWidget(title=f"{title}: workers in use", width=8,
                               left=[self._glue_metric(GLUE_EXECUTORS, job.job_name, statistic="Average")]),
                cw.GraphWidget(title=f"{title}: dead letters", width=8,
                               left=[self._app_metric(DEAD_LETTERS, job.source_name)]),
                # Glue's job metrics ("Monitoring AWS Glue using Amazon CloudWatch metrics": JobName, JobRunId ALL,
                # Type count for the aggregates, gauge for the file system bytes; Sum of deltas).
                cw.GraphWidget(title=f"{title}: failed / killed Spark tasks", width=8,
                               left=[self._glue_metric(GLUE_FAILED_TASKS, job.job_name, statistic="Sum", type_="count")
                                     .with_(label="failed"),
                                     self._glue_metric(GLUE_KILLED_TASKS, job.job_name, statistic="Sum", type_="count")
                                     .with_(label="killed")]),
            )
            dashboard.add_widgets(
                cw.GraphWidget(title=f"{title}: bytes read / written per minute", width=8,
                               left=[self._glue_metric(GLUE_BYTES_READ, job.job_name, statistic="Sum", type_="count")
                                     .with_(label="read"),
                                     self._glue_metric(GLUE_BYTES_WRITTEN, job.job_name, statistic="Sum")
                                     .with_(label="written to S3")]),
                # One BatchDurationMs sample per micro-batch (glue_jobs.metrics): its count per window is the batches.
                cw.GraphWidget(title=f"{title}: batches per window", width=8,
                               left=[self._app_metric(BATCH_DURATION, job.source_name, statistic="SampleCount",
                                                      period=cdk.Duration.seconds(max(60, window_size_seconds)))
                                     .with_(label="batches")]),
                *([self._kinesis_calls_widget(title, job.stream_name)] if job.stream_name else []),
            )
        dashboard.add_widgets(
            cw.GraphWidget(title="compaction duration (ms)", width=8,
                           left=[self._app_metric(COMPACTION_DURATION, None, statistic="Maximum", period=cdk.Duration.hours(1))]),
            cw.GraphWidget(title="compaction files before / after", width=8,
                           left=[self._app_metric(COMPACTION_FILES_BEFORE, None, period=cdk.Duration.hours(1)),
                                 self._app_metric(COMPACTION_FILES_AFTER, None, period=cdk.Duration.hours(1))]),
            cw.AlarmStatusWidget(title="alarms", width=8, alarms=list(self.alarms.values())),
        )
        # S3's daily storage metrics are per bucket, not per dataset (AWS/S3 BucketSizeBytes with StorageType
        # StandardStorage, NumberOfObjects with AllStorageTypes; "reported once per day", S3 "Metrics and dimensions").
        # Athena's ProcessedBytes per workgroup needs the workgroup's PublishCloudWatchMetricsEnabled (infra/readers.py
        # sets it; Athena "Monitoring Athena queries with CloudWatch metrics").
        lake = []
        if lake_bucket_name is not None:
            day = cdk.Duration.days(1)
            lake = [cw.GraphWidget(title="lake bucket: size (bytes) and objects, daily", width=8,
                                   left=[cw.Metric(namespace="AWS/S3", metric_name="BucketSizeBytes", statistic="Average",
                                                   period=day, label="bytes", dimensions_map={
                                                       "BucketName": lake_bucket_name, "StorageType": "StandardStorage"})],
                                   right=[cw.Metric(namespace="AWS/S3", metric_name="NumberOfObjects", statistic="Average",
                                                    period=day, label="objects", dimensions_map={
                                                        "BucketName": lake_bucket_name, "StorageType": "AllStorageTypes"})])]
        athena = []
        if athena_workgroup is not None:
            athena = [cw.GraphWidget(title="readers: Athena bytes scanned per hour", width=8,
                                     left=[cw.Metric(namespace="AWS/Athena", metric_name="ProcessedBytes", statistic="Sum",
                                                     period=cdk.Duration.hours(1), label="scanned",
                                                     dimensions_map={"WorkGroup": athena_workgroup,
                                                                     "QueryState": "SUCCEEDED", "QueryType": "DML"})])]
        # Per dataset, what the compaction job measures after each run (compaction/glue_entry.publish_lake_sizes).
        lake += [cw.GraphWidget(title=f"{dataset}: lake size (bytes) and files, after each compaction", width=8,
                                left=[self._dataset_metric(COMPACTION_LAKE_BYTES, dataset).with_(label="bytes")],
                                right=[self._dataset_metric(COMPACTION_LAKE_FILES, dataset).with_(label="files")])
                 for dataset in sorted(self.datasets)]
        if lake or athena:
            dashboard.add_widgets(*lake, *athena)
        return dashboard

    def _dataset_metric(self, name: str, dataset: str) -> cw.Metric:
        return cw.Metric(namespace=APP_NAMESPACE, metric_name=name, statistic="Maximum", period=cdk.Duration.hours(1),
                         dimensions_map={"Environment": self.environment, "Dataset": dataset})

    def _kinesis_calls_widget(self, title: str, stream_name: str) -> cw.GraphWidget:
        """Successful reads and writes beside the throttling alarms: GetRecords.Success and PutRecord(s).Success, stream
        level, "always available" (Kinesis "Monitoring the Amazon Kinesis Data Streams service with CloudWatch")."""
        dims = {"StreamName": stream_name}
        return cw.GraphWidget(title=f"{title}: Kinesis calls succeeding (share)", width=8, left=[
            cw.Metric(namespace="AWS/Kinesis", metric_name=name, statistic="Average", period=ONE_MINUTE, dimensions_map=dims,
                      label=label)
            for name, label in (("GetRecords.Success", "reads"), ("PutRecords.Success", "batch writes"),
                                ("PutRecord.Success", "single writes"))])
