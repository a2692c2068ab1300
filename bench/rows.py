"""The rows of `make bench`'s result table: what each benchmark measured, its target and whether it is met.

Each benchmark puts its rows in its JSON result under "rows"; bench/report.py gathers them into one table
(bench-output/bench.json and docs/benchmarks.md) and fails when a row misses its target, naming it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from glue_jobs.session import LOCAL_FS_VARIABLE, forkless_local_fs

# The benchmarks run on Hadoop's own local file system unless STREAMLAKE_LOCAL_FS says otherwise (every benchmark and
# the processes it starts import this first): it starts a process per file and directory created, a cost per file
# that stands in for the object store's. Without it the bare paths, which write more files than the runner, gain the
# most (figures: docs/performance.md, "The local file system").
os.environ.setdefault(LOCAL_FS_VARIABLE, "hadoop")


def local_fs() -> str:
    """The local file system the figures were measured on, as the report names it."""
    return "forkless (jvm/glue-functions ForklessLocalFileSystem)" if forkless_local_fs() else "Hadoop's own (a process per chmod)"


def at_least(name: str, value: float, target: float, unit: str = "") -> dict:
    """A row met when value >= target (a ratio of our speed to bare Spark's)."""
    return {"row": name, "value": value, "target": target, "op": ">=", "unit": unit}


def at_most(name: str, value: float, target: float, unit: str = "") -> dict:
    """A row met when value <= target (a time, or a ratio of our time to bare Spark's)."""
    return {"row": name, "value": value, "target": target, "op": "<=", "unit": unit}


def measured(name: str, value: float, unit: str = "") -> dict:
    """A figure without a target: shown in the table, never failing it."""
    return {"row": name, "value": value, "target": None, "op": None, "unit": unit}


def met(row: dict) -> bool | None:
    """Whether the row meets its target; None for a row without one."""
    if row["target"] is None:
        return None
    return row["value"] >= row["target"] if row["op"] == ">=" else row["value"] <= row["target"]


def write_result(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def alternate(bare, ours, *, warmup: int, repeats: int, log=print) -> tuple[dict[str, list[float]], object]:
    """Run `bare()` then `ours()` warmup + repeats times, alternating (the same warm JVM for both), timing each.
    Returns the measured seconds per side (warm-up passes left out) and what the last `ours()` returned."""
    import time

    passes: dict[str, list[float]] = {"bare": [], "runner": []}
    result = None
    for number in range(warmup + repeats):
        started = time.perf_counter()
        bare()
        bare_seconds = time.perf_counter() - started
        started = time.perf_counter()
        result = ours()
        our_seconds = time.perf_counter() - started
        phase = "warm-up" if number < warmup else "measured"
        log(f"pass {number + 1} ({phase}): bare {bare_seconds:.2f} s, runner {our_seconds:.2f} s", flush=True)
        if number >= warmup:
            passes["bare"].append(bare_seconds)
            passes["runner"].append(our_seconds)
    return passes, result
