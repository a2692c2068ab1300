"""The rows of `make bench`'s result table: what each benchmark measured, its target and whether it is met.

Each benchmark puts its rows in its JSON result under "rows"; bench/report.py gathers them into one table
(bench-output/bench.json and docs/benchmarks.md) and fails when a row misses its target, naming it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from glue_jobs.session import LOCAL_FS_VARIABLE, forkless_local_fs

# The benchmarks' local file system, unless STREAMLAKE_LOCAL_FS says otherwise: Hadoop's own starts a process per file
# and directory created, a cost per file that stands in for the object store's. Without it the bare paths, which write
# more files than the runner, gain the most (figures: docs/performance.md, "The local file system").
BENCH_LOCAL_FS = "hadoop"


def use_local_fs(kind: str | None = None) -> None:
    """Set the local file system of this benchmark's sessions and of the processes it starts (they inherit the
    variable): `kind`, or BENCH_LOCAL_FS unless STREAMLAKE_LOCAL_FS is set. Each benchmark's `main` calls it first, never
    an import: a test that imports a benchmark's helpers keeps its own file system (tests/ops/test_bench_report.py)."""
    if kind is not None:
        os.environ[LOCAL_FS_VARIABLE] = kind
    else:
        os.environ.setdefault(LOCAL_FS_VARIABLE, BENCH_LOCAL_FS)
    forkless_local_fs()  # a misspelt value fails here, naming the variable


def jit_compile_ms(spark) -> int | None:
    """Milliseconds the JVM's just-in-time compilers have spent so far, summed over their threads:
    `CompilationMXBean.getTotalCompilationTime` ("the approximate accumulated elapsed time (in milliseconds) spent in
    compilation. If multiple threads are used for compilation, this value is summation of the approximate time that each
    thread spent in compilation", Java SE 17 API, java.lang.management). In local mode the driver's JVM runs the tasks
    too, so this is all the compiling the measured work caused. None when the JVM does not monitor compilation time.

    Why a benchmark reads it: on 2 cores, HotSpot's compiler threads share the CPU with the work being timed, for
    dozens of small batches after the first (figures: docs/performance.md, "Warm is when the compiler is quiet")."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    return int(bean.getTotalCompilationTime()) if bean.isCompilationTimeMonitoringSupported() else None


def jit_quiet(pairs: list[tuple[float, int | None]], *, window: int, share: float) -> bool:
    """Whether the last `window` (seconds, compiler milliseconds) pairs spent at most `share` of their time compiling:
    the warm-up's end (jit_compile_ms). Without compiler figures, never quiet: the caller's cap ends the warm-up."""
    last = pairs[-window:]
    if len(last) < window or any(ms is None for _, ms in last):
        return False
    return sum(ms for _, ms in last) / 1000 <= share * sum(seconds for seconds, _ in last)


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


def alternate(bare, ours, *, warmup: int, repeats: int, log=print, spark=None) -> tuple[dict[str, list], object]:
    """Run `bare()` then `ours()` warmup + repeats times, alternating (the same warm JVM for both), timing each.
    Returns the measured seconds per side (warm-up passes left out) and what the last `ours()` returned. With `spark`,
    each pass's JIT compiler milliseconds too (jit_compile_ms), warm-up passes included: "bare_compiler_ms" and
    "runner_compiler_ms", so a reader sees how much compiling the measured passes still shared the cores with."""
    import time

    passes: dict[str, list] = {"bare": [], "runner": [], **({"bare_compiler_ms": [], "runner_compiler_ms": []} if spark else {})}
    result = None

    def compiled() -> int | None:
        return jit_compile_ms(spark) if spark is not None else None

    for number in range(warmup + repeats):
        before, started = compiled(), time.perf_counter()
        bare()
        bare_seconds, middle = time.perf_counter() - started, compiled()
        started = time.perf_counter()
        result = ours()
        our_seconds, after = time.perf_counter() - started, compiled()
        phase = "warm-up" if number < warmup else "measured"
        jit = "" if before is None else f" (compiler: bare {middle - before} ms, runner {after - middle} ms)"
        log(f"pass {number + 1} ({phase}): bare {bare_seconds:.2f} s, runner {our_seconds:.2f} s{jit}", flush=True)
        if before is not None:
            passes["bare_compiler_ms"].append(middle - before)
            passes["runner_compiler_ms"].append(after - middle)
        if number >= warmup:
            passes["bare"].append(bare_seconds)
            passes["runner"].append(our_seconds)
    return passes, result
