"""Benchmark: a quiet source's micro-batches in a shared job, beside a busy source and beside an all-bad one.

    python bench/bench_isolation.py [--window 1] [--records 200] [--ratio 50] [--windows 12] [--warmup 3]
                                    [--out bench-output/isolation.json]

One process, one local Spark application with fair scheduling (`spark.scheduler.mode` FAIR, as the Glue entrypoint
starts it), each source's query in a thread of its own and its own scheduler pool (glue_jobs/sources/source_queries.py
run_sources), each running the job's batch function (MicroBatchWriter over the local runner's text source) on its
own lake, dead letters and checkpoint, on the forkless local file system. Every `--window` seconds a feeder hands each
source its next file; after unmeasured rounds of the three runs below, until the JVM's compiler is quiet (a round
spent at most JIT_SHARE of its time compiling, bench/rows.py jit_quiet; at most --max-warmup rounds), three runs, one
after the other:
  alone: the quiet source only, `--records` generated clickstream records a window;
  busy:  the quiet source beside one receiving `--ratio` times as many (its batches longer than the window);
  bad:   the quiet source beside one receiving as many records, every one of them bad (all dead letters).
The figure is the median duration of the quiet source's batches (BatchStats.duration_ms, the batch function's own
time) after `--warmup` batches, in each run; the rows are busy/alone and bad/alone, target <= 1.2 (issue 59: within
20% of running alone). Exits 2, saying why, when the busy source's batches were not longer than the window (the case
the target is about: busy_case_missed). Measured on this machine (2 cores), not on Glue: a G.025X worker has 2 vCPUs as well, but a
Glue job's driver and executors are separate machines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.rows import at_most, jit_compile_ms, jit_quiet, measured, use_local_fs, write_result  # noqa: E402

TARGET = 1.2
JIT_SHARE = 0.2  # a warm-up round that spent at most this share of its wall time in the JIT compilers ends the warm-up


def _files(folder: Path, *, records: int, windows: int, seed: int, bad_ratio: float) -> list[Path]:
    from glue_jobs.generate import generate

    generate(folder, records=records * windows, files=windows, bad_ratio=bad_ratio, seed=seed, span_hours=1)
    return sorted(folder.glob("*.json*"))


def _source(spark, name: str, work: Path):
    """A source as a shared job runs it: its input folder, and a start() that runs its query until stopped; the
    quiet source's batch durations land in `durations`."""
    import json
    import uuid

    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.metrics import LogMetricsSink
    from glue_jobs.sources import from_local_files

    root = work / name
    for sub in ("in", "cp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "cp" / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    writer = MicroBatchWriter(spark, source_name=name, lake_path=str(root / "lake"), dead_letter_path=str(root / "dead"),
                              checkpoint_path=str(root / "cp"), metrics=LogMetricsSink())
    durations: list[float] = []

    def batch(raw, batch_id) -> None:
        stats = writer(from_local_files(raw, name, int(time.time() * 1000)), batch_id)
        durations.append(stats.duration_ms / 1000)

    return root / "in", durations, batch


def run(spark, work: Path, *, window: int, files: dict[str, list[Path]], quiet_batches: int) -> dict[str, list[float]]:
    """Feed each source one file a window, run every source's query side by side until the quiet source has made
    `quiet_batches` batches; return each source's batch durations."""
    from glue_jobs.sources.source_queries import run_sources

    shutil.rmtree(work, ignore_errors=True)
    sources = {name: _source(spark, name, work) for name in files}
    queries = {}

    def start(name: str):
        folder, _, batch = sources[name]

        def started() -> None:
            stream = spark.readStream.format("text").option("wholetext", "true").option("maxFilesPerTrigger", "1") \
                .load(str(folder))
            query = stream.writeStream.foreachBatch(batch).trigger(processingTime=f"{window} seconds") \
                .option("checkpointLocation", str(work / name / "cp")).queryName(f"bench-{name}").start()
            queries[name] = query
            query.awaitTermination()

        return started

    stop = threading.Event()

    def feed() -> None:
        for index in range(max(len(f) for f in files.values())):
            for name, paths in files.items():
                if index < len(paths):
                    folder = sources[name][0]
                    hidden = folder / f".{index:05d}.json"
                    shutil.copyfile(paths[index], hidden)
                    hidden.rename(folder / f"{index:05d}.json")
            if stop.wait(window):
                return

    def watch() -> None:
        durations = sources["quiet"][1]
        while len(durations) < quiet_batches:
            time.sleep(0.2)
        stop.set()
        for query in list(queries.values()):
            query.stop()

    threads = [threading.Thread(target=feed, daemon=True), threading.Thread(target=watch, daemon=True)]
    for thread in threads:
        thread.start()
    run_sources(spark.sparkContext, {name: start(name) for name in files})
    return {name: list(source[1]) for name, source in sources.items()}


def main(argv: list[str] | None = None) -> int:
    use_local_fs("forkless")  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=1, help="trigger interval of every source, seconds (default 1)")
    parser.add_argument("--records", type=int, default=200, help="records per window of the quiet source (default 200)")
    parser.add_argument("--ratio", type=int, default=50, help="how many times more the busy source receives (default 50)")
    parser.add_argument("--windows", type=int, default=12, help="quiet batches measured per run, after the warm-up (default 12)")
    parser.add_argument("--warmup", type=int, default=3, help="quiet batches left out at the start of each run (default 3)")
    parser.add_argument("--max-warmup", type=int, default=4,
                        help="unmeasured rounds of the three runs at most, when the compiler is not quiet before (default 4)")
    parser.add_argument("--scheduler", choices=("FAIR", "FIFO"), default="FAIR",
                        help="spark.scheduler.mode (default FAIR, as the job runs; FIFO to compare)")
    parser.add_argument("--out", type=Path, default=Path("bench-output/isolation.json"), help="where the result goes")
    args = parser.parse_args(argv)
    if args.max_warmup < 0:
        parser.error("--max-warmup must be 0 or more")

    from glue_jobs.session import local_session

    spark = local_session("bench-isolation", master="local[2]", settings={
        "spark.scheduler.mode": args.scheduler, "spark.sql.shuffle.partitions": "2"})
    work = Path("bench-output/isolation-work")
    batches = args.windows + args.warmup
    inputs = Path("bench-output/isolation-inputs")
    shutil.rmtree(inputs, ignore_errors=True)
    quiet = _files(inputs / "quiet", records=args.records, windows=batches + 2, seed=1, bad_ratio=0.01)
    loud = args.records * args.ratio
    busy = _files(inputs / "busy", records=loud, windows=batches + 2, seed=2, bad_ratio=0.01)
    bad = _files(inputs / "bad", records=loud, windows=batches + 2, seed=3, bad_ratio=1.0)
    medians: dict[str, float] = {}
    compiler_ms: dict[str, int | None] = {}
    scenarios = (("alone", {"quiet": quiet}), ("busy", {"quiet": quiet, "busy": busy}), ("bad", {"quiet": quiet, "bad": bad}))

    def timed_run(label: str, files: dict[str, list[Path]]) -> tuple[dict[str, list[float]], float, int | None]:
        before, started = jit_compile_ms(spark), time.perf_counter()
        every = run(spark, work / label, window=args.window, files=files, quiet_batches=batches)
        return every, time.perf_counter() - started, None if before is None else jit_compile_ms(spark) - before

    # Unmeasured rounds of all three runs first, until the compiler is quiet: a run measured while the JVM still
    # compiles the batch's code (the busy and all-bad sources' paths too) measures the compiler beside it
    # (docs/performance.md, "Warm is when the compiler is quiet"; isolation).
    warm: list[tuple[float, int | None]] = []
    while len(warm) < args.max_warmup and not jit_quiet(warm, window=1, share=JIT_SHARE):
        seconds, compiled = 0.0, 0
        for label, files in scenarios:
            _, run_seconds, run_compiled = timed_run(f"warm-up-{label}", files)
            seconds, compiled = seconds + run_seconds, None if run_compiled is None or compiled is None else compiled + run_compiled
        warm.append((seconds, compiled))
        print(f"warm-up round {len(warm)}: {seconds:.1f} s, compiler {compiled} ms", flush=True)
    every_busy: list[float] = []
    for label, files in scenarios:
        every, _, compiler_ms[label] = timed_run(label, files)
        every_busy = every.get("busy", every_busy)
        durations = every["quiet"][args.warmup:]
        medians[label] = statistics.median(durations)
        other = [f"; the {name} source's median {statistics.median(d[1:]):.2f} s over {len(d) - 1} batches"
                 for name, d in every.items() if name != "quiet" and len(d) > 1]
        print(f"{label}: quiet source's batches {', '.join(f'{d:.2f}' for d in durations)} s, "
              f"median {medians[label]:.3f} s, compiler {compiler_ms[label]} ms{''.join(other)}", flush=True)
    busy_median = statistics.median(every_busy[1:]) if len(every_busy) > 1 else None
    rows = [
        measured("quiet source alone, median batch (s)", round(medians["alone"], 3), "s"),
        *([measured(f"the {args.ratio}x busy source's median batch (s), window {args.window} s", round(busy_median, 3), "s")]
          if busy_median is not None else []),
        at_most(f"quiet beside a {args.ratio}x busy source / alone", round(medians["busy"] / medians["alone"], 3), TARGET),
        at_most(f"quiet beside an all-bad {args.ratio}x source / alone", round(medians["bad"] / medians["alone"], 3), TARGET),
    ]
    missed = busy_case_missed(busy_median, args.window)
    write_result(args.out, {"bench": "isolation", "busy_case_missed": missed, "scheduler": args.scheduler, "window_seconds": args.window, "records": args.records,
                            "ratio": args.ratio, "medians": medians, "compiler_ms": compiler_ms,
                            "warmup_rounds": [{"seconds": round(sec, 1), "compiler_ms": ms} for sec, ms in warm], "rows": rows})
    for row in rows:
        print(f"{row['row']}: {row['value']}" + (f" (target <= {row['target']})" if row["target"] else ""))
    spark.stop()
    if missed:
        print(missed, file=sys.stderr)
        return 2
    return 0


def busy_case_missed(busy_median: float | None, window: int) -> str | None:
    """None when the busy source's batches took longer than the window, as issue 59's isolation case asks ("its batches
    longer than the window"); else why the run does not measure that case. On a faster machine the same `--ratio` gives
    batches shorter than the window, and the busy source then leaves the cores idle part of each window."""
    if busy_median is None:
        return "the busy source made fewer than two batches: the run does not measure the busy case"
    if busy_median <= window:
        return (f"the busy source's batches took {busy_median:.2f} s (median), not longer than the {window} s window: this run "
                "does not measure the case issue 59 asks for; raise --ratio")
    return None


if __name__ == "__main__":
    sys.exit(main())
