"""Per-batch metrics: a sink receives each BatchStats. Locally a log line; in Glue, CloudWatch.

CloudWatch: namespace StreamLake (METRICS_NAMESPACE, shared with compaction/metrics.py and imported by the
infrastructure's grants and alarms), dimensions Source and Environment,
metrics RecordsIn, RecordsWritten, DeadLetters, DuplicatesCollapsed (Count), BatchDurationMs and ArrivalLagMs
(Milliseconds; the latter for a batch that read records); with dimensions Dataset and Environment, NewestEventAgeSeconds (a batch that wrote rows)
and, when non-zero, UnknownFields and DifferingDuplicates. A routed source's sink (`routed`) adds, per dataset part,
RecordsIn and DeadLetters with dimensions Source, Dataset and Environment (the dataset's share of the source), and per
batch UnroutableRecords with Source and Environment (the records no route took). The alarms in infra/monitoring.py are
built on exactly these names and dimensions.
"""

from __future__ import annotations

import logging
from typing import Protocol

METRICS_NAMESPACE = "StreamLake"
RECORDS_IN = "RecordsIn"
RECORDS_WRITTEN = "RecordsWritten"
DEAD_LETTERS = "DeadLetters"
DUPLICATES_COLLAPSED = "DuplicatesCollapsed"
BATCH_DURATION_MS = "BatchDurationMs"
# Per dataset (dimensions Dataset and Environment): how far the newest event time a batch wrote lags behind
# the batch's processing time; the freshness alarm watches its minimum over the sources of a dataset.
NEWEST_EVENT_AGE_SECONDS = "NewestEventAgeSeconds"
# Per source: processing time minus the earliest arrival (record) time of a batch, the Kafka jobs' consumer lag:
# Glue's glue.driver.streaming.maxConsumerLagInMs comes from its own Kafka reader, not from Spark's the job uses.
ARRIVAL_LAG_MS = "ArrivalLagMs"
# Per source, only when non-zero: anomalies of Glue's source frame the adapter worked around instead of failing the
# batch (glue_jobs/sources.from_kinesis: unexpected columns, a missing or odd record timestamp); each is logged.
FRAME_ANOMALIES = "FrameAnomalies"
# Per dataset, only when non-zero: valid records with fields the schema does not know, kept or dropped (dataset.json
# unknown_fields keep/drop; a rejected one is a dead letter, reason unknown_field).
UNKNOWN_FIELDS = "UnknownFields"
# Per source, only when non-zero: records whose payload holds U+FFFD where Glue decoded the bytes before the job
# (Kinesis; BatchStats.replacement_characters).
REPLACEMENT_CHARACTERS = "ReplacementCharacters"
# Per dataset, only when non-zero: of the duplicates a batch collapsed, the copies whose content differed from the copy
# kept (BatchStats.differing_duplicates); the compaction publishes its own as CompactionDifferingDuplicates.
DIFFERING_DUPLICATES = "DifferingDuplicates"
# Per routed source: the records of a batch no route took (its unroutable dead letters); the unroutable-share alarm.
UNROUTABLE_RECORDS = "UnroutableRecords"
METRIC_NAMES = (RECORDS_IN, RECORDS_WRITTEN, DEAD_LETTERS, DUPLICATES_COLLAPSED, BATCH_DURATION_MS)  # per source

log = logging.getLogger("glue_jobs.metrics")


class MetricsSink(Protocol):
    def emit(self, stats) -> None: ...


class NoOpMetricsSink:
    def emit(self, stats) -> None:
        return None


class LogMetricsSink:
    """The local sink: one structured log line per batch."""

    def emit(self, stats) -> None:
        log.info("metrics %s", {name: value for name, value, _ in _values(stats)})


def _values(stats) -> list[tuple[str, float, str]]:
    return [
        (RECORDS_IN, stats.records_in, "Count"),
        (RECORDS_WRITTEN, stats.records_written, "Count"),
        (DEAD_LETTERS, stats.dead_letters, "Count"),
        (DUPLICATES_COLLAPSED, stats.duplicates_collapsed, "Count"),
        (BATCH_DURATION_MS, stats.duration_ms, "Milliseconds"),
    ]


def metric_data(stats, environment: str, *, routed: bool = False) -> list[dict]:
    """The PutMetricData payload for one batch, or one part of a routed source's batch (`routed`: the module doc),
    pure, so it is tested without AWS."""
    dimensions = [{"Name": "Source", "Value": stats.source}, {"Name": "Environment", "Value": environment}]
    data = [
        {"MetricName": name, "Dimensions": dimensions, "Value": float(value), "Unit": unit}
        for name, value, unit in _values(stats)
    ]
    if stats.arrival_lag_ms is not None:
        data.append({"MetricName": ARRIVAL_LAG_MS, "Dimensions": dimensions, "Value": float(stats.arrival_lag_ms),
                     "Unit": "Milliseconds"})
    if stats.frame_anomalies:
        data.append({"MetricName": FRAME_ANOMALIES, "Dimensions": dimensions, "Value": float(stats.frame_anomalies),
                     "Unit": "Count"})
    if stats.replacement_characters:
        data.append({"MetricName": REPLACEMENT_CHARACTERS, "Dimensions": dimensions, "Value": float(stats.replacement_characters),
                     "Unit": "Count"})
    if stats.dataset and stats.unknown_fields:
        data.append({"MetricName": UNKNOWN_FIELDS, "Value": float(stats.unknown_fields), "Unit": "Count",
                     "Dimensions": [{"Name": "Dataset", "Value": stats.dataset}, {"Name": "Environment", "Value": environment}]})
    if stats.dataset and stats.differing_duplicates:
        data.append({"MetricName": DIFFERING_DUPLICATES, "Value": float(stats.differing_duplicates), "Unit": "Count",
                     "Dimensions": [{"Name": "Dataset", "Value": stats.dataset}, {"Name": "Environment", "Value": environment}]})
    if stats.dataset and stats.newest_event_age_seconds is not None:
        data.append({"MetricName": NEWEST_EVENT_AGE_SECONDS, "Value": float(stats.newest_event_age_seconds), "Unit": "Seconds",
                     "Dimensions": [{"Name": "Dataset", "Value": stats.dataset}, {"Name": "Environment", "Value": environment}]})
    if routed and stats.dataset:
        part = [{"Name": "Source", "Value": stats.source}, {"Name": "Dataset", "Value": stats.dataset},
                {"Name": "Environment", "Value": environment}]
        data += [{"MetricName": name, "Dimensions": part, "Value": float(value), "Unit": "Count"}
                 for name, value in ((RECORDS_IN, stats.records_in), (DEAD_LETTERS, stats.dead_letters))]
    elif routed:
        data.append({"MetricName": UNROUTABLE_RECORDS, "Dimensions": dimensions, "Value": float(stats.dead_letters),
                     "Unit": "Count"})
    return data


class CloudWatchPublisher:
    """PutMetricData for one environment (the Environment dimension): the streaming and the compaction sinks
    both publish through it.

    The client is made in the job's region, passed by the stack (--metrics_region): boto3's default region
    depends on the process environment, which nothing here controls. boto3 is imported on first use (the
    Glue runtime has it; the Spark 3.3 test venv does not)."""

    _BATCH = 1000  # PutMetricData accepts up to 1,000 metrics per call

    def __init__(self, environment: str, *, namespace: str = METRICS_NAMESPACE, region: str | None = None,
                 client=None) -> None:
        self.environment = environment
        self.namespace = namespace
        self.region = region
        self._client = client

    @property
    def client(self):
        if self._client is None:
            import boto3

            self._client = boto3.client("cloudwatch", region_name=self.region)
        return self._client

    def put(self, metric_data: list[dict]) -> None:
        for start in range(0, len(metric_data), self._BATCH):
            self.client.put_metric_data(Namespace=self.namespace, MetricData=metric_data[start:start + self._BATCH])


class CloudWatchMetricsSink(CloudWatchPublisher):
    """Each batch's metrics to CloudWatch (`routed`: a routed source's, with its per-dataset and unroutable metrics).
    A failure to publish is logged, never raised: metrics must not fail a batch that was written."""

    def __init__(self, environment: str, *, routed: bool = False, **publisher) -> None:
        super().__init__(environment, **publisher)
        self.routed = routed

    def emit(self, stats) -> None:
        try:
            self.put(metric_data(stats, self.environment, routed=self.routed))
        except Exception:  # noqa: BLE001 - see class docstring
            log.exception("could not publish metrics for batch %s of %s", stats.batch_id, stats.source)
