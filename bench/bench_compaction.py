"""Benchmark: compaction of one hour partition of many small files vs a bare Spark read-and-write.

    .venv/bin/python bench/bench_compaction.py [--files 2000] [--rows-per-file 500] [--target-file-mb 4]
                                               [--repetitions 5] [--out build/bench_compaction.json]

In ONE process and Spark session: generate a pristine partition of --files streaming-style files, then
alternate (after warm-up pairs, not counted, until the JVM's compiler is quiet: bench/rows.py jit_quiet)
  bare:       list the partition, spark.read.parquet(*files).repartition(N).write.parquet(new dir), with N the
              number of files the compaction produces;
  compaction: the full job on that partition (recovery scan, discovery, journal, read exactly the files,
              dedup, staging, verification, publish, input deletes, history),
resetting the partition from the pristine copy before every compaction (untimed). Prints the medians and
the ratio compaction/bare and writes everything to --out as JSON. Target: ratio <= 1.1.

Both sides run with the same session settings, including the listing parallelism the job sets for its
reads (Spark's default would check 2,000 explicitly listed files with a 2,000-task job, which costs
more than either side's real work on a small machine). The sizing ratio the job learns in the warm-up
is kept, as it is between hourly runs in production, so the timed runs size from a measured ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.rows import at_most, jit_compile_ms, jit_quiet, use_local_fs  # noqa: E402
from compaction.faults import FaultInjector  # noqa: E402
from compaction.job import Compactor  # noqa: E402
from compaction.metrics import LogMetricSink  # noqa: E402
from compaction.settings import MB, CompactionSettings  # noqa: E402
from compaction.transforms import data_columns, data_schema  # noqa: E402
from glue_jobs.lake.storage import HadoopStorage  # noqa: E402

TARGET_RATIO = 1.1  # compaction time / bare read-and-write time (issue 32)
# The warm-up ends when the last JIT_WINDOW pairs spent at most JIT_SHARE of their wall time in the JIT compilers
# (a pair is a compaction and a bare rewrite, about ten seconds here; bench_small_batch.py's pairs are about one).
JIT_WINDOW = 2
JIT_SHARE = 0.2
HOUR = datetime(2026, 1, 1, 5, tzinfo=timezone.utc)
PARTITION = f"event_date={HOUR:%Y-%m-%d}/event_hour={HOUR.hour}"


def spark_session():
    from glue_jobs.session import local_session

    spark = local_session("bench-compaction", master="local[2]", settings={"spark.driver.memory": "2g"})
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(spark.sparkContext.defaultParallelism))
    return spark


def generate(spark, partition_dir: Path, files: int, rows_per_file: int) -> None:
    """files x rows_per_file lake rows, 1% of event_ids repeated (replays), one file per range partition."""
    from pyspark.sql import functions as F

    total = files * rows_per_file
    hour_start = int(HOUR.timestamp())
    columns = {
        "event_id": F.concat(F.lit("evt-"), (F.col("id") % (total - total // 100)).cast("string")),
        "event_type": F.element_at(F.array(*[F.lit(t) for t in ("click", "view", "purchase")]), (F.col("id") % 3 + 1).cast("int")),
        "event_time": (F.lit(hour_start) + F.col("id") % 3600).cast("timestamp"),
        "user_id": F.concat(F.lit("user-"), (F.col("id") * 7919 % 50_000).cast("string")),
        "amount": (F.col("id") * 31 % 100_000) / 100.0,
        "currency": F.lit("EUR"),
        "metadata": F.concat(F.lit('{"page": "/p/'), (F.col("id") % 200).cast("string"), F.lit('"}')),
        "source": F.lit("clickstream"),
        "source_partition": (F.col("id") % 4).cast("string"),
        "source_offset": F.col("id").cast("string"),
        "arrival_time": (F.lit(hour_start + 60) + F.col("id") % 3600).cast("timestamp"),
        "batch_id": (F.col("id") / rows_per_file).cast("long"),
    }
    scratch = partition_dir.parent / "_generate"
    # A few tasks, each rolling to a new file every `rows_per_file` rows (maxRecordsPerFile): the same files, each of
    # consecutive ids, as a task per file made, without scheduling and committing a task per file (docs/performance.md
    # "make bench's length"). Each task's range is a whole number of files. Spark names a task's files
    # part-<task>-<job>-c<n>: ordered by task, then n, they are in id order.
    tasks = next(n for n in (4, 2, 1) if files % n == 0)
    frame = spark.range(0, total, numPartitions=tasks).select(*[columns[c].alias(c) for c in data_columns()])
    frame.write.option("compression", "snappy").option("maxRecordsPerFile", rows_per_file).parquet(str(scratch))
    partition_dir.mkdir(parents=True)
    written = sorted(scratch.glob("*.parquet"), key=_task_and_file)
    if len(written) != files:
        raise RuntimeError(f"generated {len(written)} files, expected {files}")
    for i, part in enumerate(written):
        part.rename(partition_dir / f"part-clickstream-b{i}-0.snappy.parquet")
    shutil.rmtree(scratch)


def _task_and_file(path: Path) -> tuple[int, int]:
    """(task, file number) of a file Spark wrote as part-<task>-<job id>-c<file number>.<codec>.parquet."""
    match = re.fullmatch(r"part-(\d+)-.*-c(\d+)\..*parquet", path.name)
    if match is None:
        raise RuntimeError(f"unexpected file name from Spark's writer: {path.name}")
    return int(match.group(1)), int(match.group(2))


def reset(pristine: Path, lake: Path) -> None:
    partition = lake / PARTITION
    if partition.exists():
        shutil.rmtree(partition)
    shutil.copytree(pristine, partition)


def bare(spark, storage: HadoopStorage, lake: Path, out: Path, file_count: int) -> float:
    if out.exists():
        shutil.rmtree(out)
    started = time.perf_counter()
    paths = [f.path for f in storage.list(str(lake / PARTITION), files_only=True, suffix=".parquet")]
    spark.read.schema(data_schema()).parquet(*paths).repartition(file_count).write.parquet(str(out))
    return time.perf_counter() - started


def compaction(spark, lake: Path, target_mb: float):
    settings = CompactionSettings(lake_path=str(lake), target_file_bytes=int(target_mb * MB), hour=HOUR)
    compactor = Compactor(spark, settings, sink=LogMetricSink("bench"), faults=FaultInjector(""),
                          now=HOUR + timedelta(hours=2))
    started = time.perf_counter()
    summary = compactor.run()
    elapsed = time.perf_counter() - started
    (result,) = summary.of("compacted")
    return elapsed, result


def main(argv=None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rows-per-file", type=int, default=500)
    parser.add_argument("--target-file-mb", type=float, default=4.0)
    parser.add_argument("--repetitions", type=int, default=5, help="measured pairs (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured pairs first, at least (default 1)")
    parser.add_argument("--max-warmup", type=int, default=10,
                        help="unmeasured pairs at most, when the compiler is not quiet before (default 10)")
    parser.add_argument("--out", default="build/bench_compaction.json")
    parser.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed after)")
    args = parser.parse_args(argv)
    if args.repetitions < 1 or args.warmup < 1 or args.max_warmup < args.warmup:
        parser.error("--repetitions and --warmup must be at least 1 (the warm-up learns the output's file count), "
                     "--max-warmup at least --warmup")

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-compaction-"))
    pristine, lake, bare_out = workdir / "pristine", workdir / "lake", workdir / "bare-out"
    spark = spark_session()
    storage = HadoopStorage(spark)
    try:
        started = time.perf_counter()
        generate(spark, pristine, args.files, args.rows_per_file)
        input_bytes = sum(p.stat().st_size for p in pristine.glob("*.parquet"))
        print(f"generated {args.files} files x {args.rows_per_file} rows = {input_bytes / MB:.1f} MB "
              f"in {time.perf_counter() - started:.1f} s")

        warm: list[tuple[float, int | None]] = []  # the warm-up pairs' (seconds, compiler milliseconds)
        while len(warm) < args.max_warmup and not (len(warm) >= args.warmup and jit_quiet(warm, window=JIT_WINDOW, share=JIT_SHARE)):
            compiled_before = jit_compile_ms(spark)
            reset(pristine, lake)
            warm_compaction, warm_result = compaction(spark, lake, args.target_file_mb)
            file_count = warm_result.files_after
            reset(pristine, lake)
            warm_bare = bare(spark, storage, lake, bare_out, file_count)
            compiled = None if compiled_before is None else jit_compile_ms(spark) - compiled_before
            warm.append((warm_compaction + warm_bare, compiled))
            print(f"warm-up {len(warm)}: compaction {warm_compaction:.2f} s (re-staged: {warm_result.restaged}), "
                  f"bare {warm_bare:.2f} s, compiler {compiled} ms", flush=True)

        bare_times, compaction_times, results = [], [], []
        compiler_ms: dict[str, list[int | None]] = {"bare": [], "compaction": []}  # the JIT's time in each (rows.jit_compile_ms)

        def compiling(side: str, call, *args):
            before = jit_compile_ms(spark)
            out = call(*args)
            compiler_ms[side].append(None if before is None else jit_compile_ms(spark) - before)
            return out

        for i in range(args.repetitions):
            # Alternate which side goes first, so a machine getting busier or quieter favours neither.
            if i % 2:
                bare_times.append(compiling("bare", bare, spark, storage, lake, bare_out, file_count))
            seconds, result = compiling("compaction", compaction, spark, lake, args.target_file_mb)
            compaction_times.append(seconds)
            results.append(result)
            sizes = sorted(p.stat().st_size for p in (lake / PARTITION).glob("*.parquet"))
            file_count = result.files_after  # bare writes as many files as the compaction did
            reset(pristine, lake)
            if not i % 2:
                bare_times.append(compiling("bare", bare, spark, storage, lake, bare_out, file_count))
            print(f"rep {i + 1}: bare {bare_times[-1]:.2f} s (compiler {compiler_ms['bare'][-1]} ms), compaction {seconds:.2f} s "
                  f"(compiler {compiler_ms['compaction'][-1]} ms) "
                  f"({result.files_before} -> {result.files_after} files, {result.duplicates} duplicates removed, "
                  f"sizes {sizes[0] / MB:.2f}-{sizes[-1] / MB:.2f} MB, re-staged: {result.restaged})")

        bare_median, compaction_median = statistics.median(bare_times), statistics.median(compaction_times)
        ratio = compaction_median / bare_median
        paired = statistics.median(c / b for c, b in zip(compaction_times, bare_times, strict=True))
        final_sizes = [size / MB for size in sizes]
        report = {
            "files": args.files,
            "rows_per_file": args.rows_per_file,
            "input_mb": round(input_bytes / MB, 2),
            "target_file_mb": args.target_file_mb,
            "output_files": file_count,
            "output_file_mb": [round(s, 3) for s in final_sizes],
            "duplicates_removed": results[-1].duplicates,
            "repetitions": args.repetitions,
            "bare_seconds": [round(t, 3) for t in bare_times],
            "compaction_seconds": [round(t, 3) for t in compaction_times],
            "compiler_ms": compiler_ms,
            "warmup_pairs": len(warm),
            "warmup_compiler_ms": [ms for _, ms in warm],
            "bare_median_seconds": round(bare_median, 3),
            "compaction_median_seconds": round(compaction_median, 3),
            "ratio": round(ratio, 3),
            "median_paired_ratio": round(paired, 3),
            "target_ratio": TARGET_RATIO,
            "meets_target": ratio <= TARGET_RATIO,
            "rows": [at_most(f"compaction / bare read-and-write, {args.files:,} files x {args.rows_per_file} rows "
                             f"(bare {bare_median:.2f} s, compaction {compaction_median:.2f} s)", round(ratio, 3), TARGET_RATIO)],
            "spark": spark.version,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "master": spark.sparkContext.master,
        }
        print(f"bare median {bare_median:.2f} s, compaction median {compaction_median:.2f} s, ratio {ratio:.3f} "
              f"(target <= {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'NOT met'}), median of per-repetition ratios {paired:.3f}; output {file_count} files of "
              f"{min(final_sizes):.2f}-{max(final_sizes):.2f} MB for a {args.target_file_mb} MB target")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {out}")
        return 0
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
