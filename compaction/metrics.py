"""Run summary metrics through an injectable sink: logged locally, CloudWatch in Glue.

Namespace StreamLake, dimension Environment (what infra/monitoring.py alarms and graphs on).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from glue_jobs.metrics import METRICS_NAMESPACE as NAMESPACE  # one namespace for both jobs
from glue_jobs.metrics import CloudWatchPublisher

PARTITIONS = "CompactionPartitions"  # partitions compacted by the run
FILES_BEFORE = "CompactionFilesBefore"  # input files of those partitions
FILES_AFTER = "CompactionFilesAfter"  # files they were compacted into
ROWS_WRITTEN = "CompactionRowsWritten"  # rows in the compacted files
DUPLICATES_REMOVED = "CompactionDuplicatesRemoved"  # rows dropped as duplicate event_ids
RECOVERED = "CompactionRecovered"  # unfinished earlier runs rolled forward or back
DURATION = "CompactionDurationMs"  # wall time of the whole run
SUCCEEDED = "CompactionSucceeded"  # 1 when every partition succeeded, else 0 (alarm: no 1 for N hours)
# Per dataset (dimension Dataset too): dropped copies whose content differed from the copy kept (docs/datasets.md
# "Duplicates"): a key that names two versions of a record, not a replay.
DIFFERING_DUPLICATES = "CompactionDifferingDuplicates"

METRIC_NAMES = (PARTITIONS, FILES_BEFORE, FILES_AFTER, ROWS_WRITTEN, DUPLICATES_REMOVED, RECOVERED, DURATION, SUCCEEDED,
                DIFFERING_DUPLICATES)
# Per dataset (dimension Dataset too), after each run of the deployed job (compaction/glue_entry.py): the bytes and files
# under the dataset's lake prefix. S3's own storage metrics are per bucket, and every dataset shares the lake bucket.
LAKE_BYTES = "LakeBytes"
LAKE_FILES = "LakeFiles"

log = logging.getLogger("compaction.metrics")


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str = "Count"
    dataset: str | None = None  # a per-dataset metric: published with the Dataset dimension too


class MetricSink(Protocol):
    def publish(self, metrics: Sequence[Metric]) -> None: ...


class LogMetricSink:
    """Local runs and tests: one JSON line per run in the log; `published` keeps them for assertions."""

    def __init__(self, environment: str = "local") -> None:
        self.environment = environment
        self.published: list[Metric] = []

    def publish(self, metrics: Sequence[Metric]) -> None:
        self.published.extend(metrics)
        log.info("metrics %s", json.dumps({"namespace": NAMESPACE, "environment": self.environment,
                                            **{m.name: m.value for m in metrics}}, sort_keys=True))


class CloudWatchMetricSink(CloudWatchPublisher):
    """A run's metrics to CloudWatch, in the namespace both jobs share."""

    def publish(self, metrics: Sequence[Metric]) -> None:
        self.put([
            {"MetricName": m.name, "Value": float(m.value), "Unit": m.unit,
             "Dimensions": [{"Name": "Environment", "Value": self.environment}]
             + ([{"Name": "Dataset", "Value": m.dataset}] if m.dataset else [])}
            for m in metrics
        ])
