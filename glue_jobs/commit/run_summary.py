"""What one run of a job did, for its command line and its metrics: the result of each unit of work, in
order (a micro-batch of the streaming job, a partition of the compaction), and the run's wall time. The
totals are summed from the results when asked for, so each result is kept once and every total agrees
with the results it comes from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Result = TypeVar("Result")


@dataclass
class RunResults(Generic[Result]):
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    def total(self, counter: str, results: Iterable[Result] | None = None) -> int:
        """The sum of one counter (a numeric attribute of the results) over `results`, all of them by default."""
        return sum(getattr(result, counter) for result in (self.results if results is None else results))
