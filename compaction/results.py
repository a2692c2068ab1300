"""What a compaction run reports: one PartitionResult per partition it looked at or recovered, and the
RunSummary the command lines print and the metrics are taken from."""

from __future__ import annotations

from dataclasses import dataclass

from compaction.metrics import (
    DIFFERING_DUPLICATES,
    DUPLICATES_REMOVED,
    DURATION,
    FILES_AFTER,
    FILES_BEFORE,
    PARTITIONS,
    RECOVERED,
    ROWS_WRITTEN,
    SUCCEEDED,
    Metric,
)
from glue_jobs.commit.run_summary import RunResults


class CompactionError(RuntimeError):
    """A partition could not be compacted safely (e.g. staged rows do not add up)."""


@dataclass
class PartitionResult:
    partition: str
    action: str  # compacted | skipped | rolled_forward | rolled_back | failed
    reason: str = ""
    run_id: str = ""
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_in: int = 0
    rows_out: int = 0
    duplicates: int = 0
    differing_duplicates: int = 0  # of the duplicates, copies whose content differed from the copy kept
    restaged: bool = False
    inputs_left: int = 0  # inputs changed after listing, kept for the next run
    seconds: float = 0.0
    error: str = ""


@dataclass
class RunSummary(RunResults[PartitionResult]):
    run_id: str = ""
    dataset: str = ""  # the lake table's dataset: the Dataset dimension of its per-dataset metrics

    def of(self, *actions: str) -> list[PartitionResult]:
        return [r for r in self.results if r.action in actions]

    @property
    def succeeded(self) -> bool:
        return not self.of("failed")

    def metrics(self) -> list[Metric]:
        compacted = self.of("compacted")
        return [
            Metric(PARTITIONS, len(compacted)),
            Metric(FILES_BEFORE, self.total("files_before", compacted)),
            Metric(FILES_AFTER, self.total("files_after", compacted)),
            Metric(ROWS_WRITTEN, self.total("rows_out", compacted)),
            Metric(DUPLICATES_REMOVED, self.total("duplicates", compacted)),
            Metric(DIFFERING_DUPLICATES, self.total("differing_duplicates", compacted), dataset=self.dataset or None),
            Metric(RECOVERED, len(self.of("rolled_forward", "rolled_back"))),
            Metric(DURATION, round(self.seconds * 1000), "Milliseconds"),
            Metric(SUCCEEDED, 1 if self.succeeded else 0),
        ]
