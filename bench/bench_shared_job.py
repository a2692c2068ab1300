"""Benchmark: one window of a shared job, eight sources' micro-batches side by side, against the same eight batches run
one after another by single-source runners.

    python bench/bench_shared_job.py [--sources 8] [--records 4000] [--warmup 1] [--repeats 3]
                                     [--out bench-output/shared-job.json]

One process, one local Spark application with fair scheduling (`spark.scheduler.mode` FAIR, as the Glue entrypoint
starts it: glue_jobs/sources/source_queries.py FAIR_SCHEDULING), on the local file system `make bench` uses (bench/rows.py).
Each source has its own 4,000 generated clickstream records (its own seed, 49 hour partitions, as the 4,000-record
row) and its own batch function (MicroBatchWriter through the local runner's text source) with its own lake, dead
letters and checkpoint. Alternating, after `--warmup` unmeasured pairs:
  separate: the eight batches one after another on the main thread, as eight single-source jobs' batches would each
            run in a cluster of their own (their sum: what eight jobs' batch time is, without their process starts);
  shared:   the eight batches at once, each in the thread and scheduler pool of its source, through run_sources (the
            shared job's own code), timed until the last ends: one window of the shared job.
The row is the median of shared/separate over the measured pairs, target <= 0.8 (issue 59: sharing must save, not
cost). Measured on this machine (2 cores), not on Glue.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.rows import alternate, at_most, local_fs, use_local_fs, write_result  # noqa: E402

TARGET = 0.8
# Warm as bench_small_batch.py defines it: the JIT compilers took at most this share of the wall time (docs/performance.md
# "Warm is when the compiler is quiet"). This row's one warm-up pair leaves them busier (its row says how busy): on 2
# cores their threads fill the core one batch after another leaves idle, so the ratio measured then flatters sharing.
JIT_WARM_SHARE = 0.2


def compiler_share(timed: dict, warmup: int) -> float | None:
    """The JIT compilers' milliseconds over the wall milliseconds of the measured passes, both sides (bench/rows.py
    alternate), or None when the JVM did not say."""
    if not timed.get("bare_compiler_ms"):
        return None
    compiled = sum(timed["bare_compiler_ms"][warmup:]) + sum(timed["runner_compiler_ms"][warmup:])
    return compiled / (1000 * (sum(timed["bare"]) + sum(timed["runner"])))


def batch_function(spark, name: str, work: Path):
    """The job's batch function for source `name`, writing under `work/name` (as bench_small_batch.batch_function)."""
    import json
    import uuid

    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.metrics import LogMetricsSink
    from glue_jobs.sources import from_local_files

    root = work / name
    (root / "cp").mkdir(parents=True, exist_ok=True)
    (root / "cp" / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    writer = MicroBatchWriter(spark, source_name=name, lake_path=str(root / "lake"), dead_letter_path=str(root / "dead"),
                              checkpoint_path=str(root / "cp"), metrics=LogMetricsSink())
    return lambda raw, batch_id: writer(from_local_files(raw, name, int(time.time() * 1000)), batch_id)


def main(argv: list[str] | None = None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=8, help="sources in the job (default 8)")
    parser.add_argument("--records", type=int, default=4000, help="records in each source's batch (default 4000)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured pairs first (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="measured pairs, alternating (default 3)")
    parser.add_argument("--work", default="bench-output/shared-job", help="scratch folder (emptied first)")
    parser.add_argument("--out", default="bench-output/shared-job.json", help="where the JSON result goes")
    args = parser.parse_args(argv)
    if args.sources < 2 or args.records < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--sources must be at least 2, --records and --repeats at least 1, --warmup 0 or more")

    from glue_jobs.generate import generate
    from glue_jobs.local_runner import _session_settings
    from glue_jobs.session import local_session, session_conf
    from glue_jobs.sources.source_queries import FAIR_SCHEDULING, run_sources

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    names = [f"source{n}" for n in range(1, args.sources + 1)]
    for seed, name in enumerate(names, start=11):
        generate(work / "input" / name, records=args.records, files=1, seed=seed)
    spark = local_session("streamlake-bench-shared", master="local[2]", settings=dict(FAIR_SCHEDULING))
    spark.sparkContext.setLogLevel("ERROR")
    streaming_conf = {**_session_settings(spark), "spark.sql.adaptive.enabled": "false"}  # as bench_small_batch
    labels = ("separate", "shared")
    with session_conf(spark, streaming_conf):
        runs = {label: {name: batch_function(spark, name, work / label) for name in names} for label in labels}
        raws = {name: spark.read.format("text").option("wholetext", "true").load(str(work / "input" / name))
                for name in names}
        batch_ids = iter(range(1_000_000))  # one batch id per pass, as a query's next batch

        def separate() -> None:
            number = next(batch_ids)
            for name in names:
                runs["separate"][name](raws[name], number)

        def shared() -> None:
            number = next(batch_ids)
            run_sources(spark.sparkContext, {name: (lambda name=name: runs["shared"][name](raws[name], number))
                                             for name in names}, poll_seconds=0.05)

        print("each pass: bare = the batches one after another, runner = the shared job's window", flush=True)
        timed, _ = alternate(separate, shared, warmup=args.warmup, repeats=args.repeats, spark=spark)
    passes = {"separate": [round(t, 3) for t in timed["bare"]], "shared": [round(t, 3) for t in timed["runner"]]}
    for label in labels:  # both ways wrote their lakes
        written = sum(1 for name in names for _ in (work / label / name / "lake").rglob("*.parquet"))
        if not written:
            raise SystemExit(f"the {label} batches wrote no lake file")
    ratio = statistics.median(s / p for s, p in zip(passes["shared"], passes["separate"], strict=True))
    compiling = compiler_share(timed, args.warmup)
    warmth = ("" if compiling is None else
              f", the JIT compiler {compiling:.0%} of the measured passes' time" + (" (not warm)" if compiling > JIT_WARM_SHARE else ""))
    row = at_most(f"one window of a shared job, {args.sources} sources x {args.records:,} records, over the same batches "
                  f"run one after another by single-source runners (after {args.warmup} warm-up pair(s){warmth}; one "
                  f"process, {local_fs()})", round(ratio, 3), TARGET)
    write_result(Path(args.out), {"bench": "shared-job", "sources": args.sources, "records": args.records,
                                  "warmup": args.warmup, "repeats": args.repeats, "passes": passes,
                                  "compiler_share": None if compiling is None else round(compiling, 3),
                                  "compiler_ms": {k: timed[k] for k in ("bare_compiler_ms", "runner_compiler_ms") if k in timed},
                                  "spark": spark.version, "rows": [row]})
    print(f"{row['row']}: {row['value']} (target <= {TARGET})", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
