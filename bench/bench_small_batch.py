"""Benchmark: the job's own cost of one small micro-batch above Spark's floor, in one process, forkless.

    python bench/bench_small_batch.py [--records 4000] [--warmup 5] [--repeats 15] [--out bench-output/small-batch.json]

One process on the forkless local file system (glue_jobs/session.py FORKLESS_LOCAL_FS: Hadoop's own starts a
`chmod` process per file, about 1 s of this batch by itself, docs/performance.md), the same records (4,000
generated clickstream records over 49 hour partitions, as (c)'s small batch in bench_streaming.py), alternating:
(a) the floor: Spark alone reads them as text, parses them and writes them by hour (bench_streaming.bare_read_parse_write);
(b) the batch function the streaming job runs (MicroBatchWriter through from_local_files, a new batch id each
    time), on the same file read whole as the local runner's text source hands it, with adaptive execution off as
    in every streaming micro-batch (Spark's StreamExecution turns `spark.sql.adaptive.enabled` off for the query's
    session: "spark.sql.adaptive.enabled is not supported in streaming DataFrames/Datasets and will be disabled").
The job's own cost is median(b) - median(a): what the contract, dead letters, duplicate ranking, commit markers and
publishing add to the write Spark needs anyway. The row's target is half of BASELINE_COST_SECONDS, the same script
run on 1d225b0 on the reference machine (docs/performance.md "The 4,000-record batch, restated").
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ["STREAMLAKE_LOCAL_FS"] = "forkless"  # before bench.rows, which keeps Hadoop's unless told otherwise

from bench.rows import at_most, measured, write_result  # noqa: E402

# This script on 1d225b0 (the commit the target is set against), alone on the reference machine (2 cores,
# docs/benchmarks.md), 2026-11-28: the median of five runs' costs (0.702-0.797 s; docs/performance.md
# "The 4,000-record batch, restated").
BASELINE_COMMIT = "1d225b0"
BASELINE_COST_SECONDS = 0.751
TARGET_SHARE_OF_BASELINE = 0.5


def batch_function(spark, work: Path):
    """The job's batch function over local files, writing under `work`. The commit markers name the query by the id
    Spark keeps in `<checkpoint>/metadata` (glue_jobs/commit.read_stream_id), written here as a query would."""
    import json
    import uuid

    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.metrics import LogMetricsSink
    from glue_jobs.sources import from_local_files

    (work / "cp").mkdir(parents=True, exist_ok=True)
    (work / "cp" / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    writer = MicroBatchWriter(spark, source_name="bench", lake_path=str(work / "lake"),
                              dead_letter_path=str(work / "dead"), checkpoint_path=str(work / "cp"),
                              metrics=LogMetricsSink())
    return lambda raw, batch_id: writer(from_local_files(raw, "bench", int(time.time() * 1000)), batch_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4000, help="records in the batch (default 4000)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured pairs first (default 5)")
    parser.add_argument("--repeats", type=int, default=15, help="measured pairs, alternating (default 15)")
    parser.add_argument("--shape", choices=("generated", "producers"), default="generated",
                        help="records as the generator makes them, or shaped like producers'")
    parser.add_argument("--span-hours", type=int, default=48,
                        help="hours the event times span before now (default 48: 49 hour partitions; 1: a live stream's batch)")
    parser.add_argument("--work", default="bench-output/small-batch", help="scratch folder (emptied first)")
    parser.add_argument("--out", default="bench-output/small-batch.json", help="where the JSON result goes")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--records and --repeats must be at least 1, --warmup 0 or more")

    from bench.bench_streaming import bare_read_parse_write
    from glue_jobs.generate import generate
    from glue_jobs.local_runner import _session_settings, local_spark_session
    from glue_jobs.session import session_conf

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    shape = {"shape": args.shape} if args.shape != "generated" else {}  # 1d225b0's generator has no shapes
    generate(work / "input", records=args.records, files=1, seed=11, span_hours=args.span_hours, **shape)
    spark = local_spark_session("streamlake-bench-small")
    spark.sparkContext.setLogLevel("ERROR")
    tracker = spark.sparkContext.statusTracker()
    passes: dict[str, list[float]] = {"bare": [], "batch": []}
    jobs: list[int] = []
    run = batch_function(spark, work / "job")
    streaming_conf = {**_session_settings(spark), "spark.sql.adaptive.enabled": "false"}
    for number in range(args.warmup + args.repeats):
        started = time.perf_counter()
        bare_read_parse_write(spark, str(work / "input"), str(work / "bare"))
        bare = time.perf_counter() - started
        with session_conf(spark, streaming_conf):
            raw = spark.read.format("text").option("wholetext", "true").load(str(work / "input"))
            before = len(tracker.getJobIdsForGroup(None))
            started = time.perf_counter()
            stats = run(raw, number)
            batch = time.perf_counter() - started
            jobs.append(len(tracker.getJobIdsForGroup(None)) - before)
        measuring = number >= args.warmup
        print(f"pair {number + 1} ({'measured' if measuring else 'warm-up'}): bare {bare:.3f} s, batch {batch:.3f} s, "
              f"{jobs[-1]} Spark jobs, written {stats.records_written}", flush=True)
        if measuring:
            passes["bare"].append(round(bare, 4))
            passes["batch"].append(round(batch, 4))
    floor, whole = statistics.median(passes["bare"]), statistics.median(passes["batch"])
    cost = round(whole - floor, 3)
    result = {"records": args.records, "shape": args.shape, "warmup": args.warmup, "repeats": args.repeats,
              "passes": passes, "spark_jobs_per_batch": jobs, "floor_seconds": round(floor, 3),
              "batch_seconds": round(whole, 3), "cost_seconds": cost, "spark": spark.version}
    name = (f"one {args.records:,}-record micro-batch, forkless, in one process: the job's own cost above bare Spark's "
            f"read-parse-write (batch {whole:.3f} s, floor {floor:.3f} s), seconds")
    if args.shape != "generated" or args.span_hours != 48 or args.records != 4000:  # not the baseline's batch
        result["rows"] = [measured(name, cost, "s")]
    else:
        result["rows"] = [at_most(f"{name}; target half of {BASELINE_COMMIT}'s {BASELINE_COST_SECONDS:.3f} s", cost,
                                  round(BASELINE_COST_SECONDS * TARGET_SHARE_OF_BASELINE, 3), "s")]
    write_result(Path(args.out), result)
    print(f"floor {floor:.3f} s, batch {whole:.3f} s, the job's own cost {cost:.3f} s; Spark jobs per batch "
          f"{statistics.median(jobs[args.warmup:]):.0f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
