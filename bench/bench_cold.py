"""Benchmark: a cold backfill, whole process: `run-local --once` against a bare read-parse-write, each its own process.

    python bench/bench_cold.py [--records 1000000] [--files 50] [--span-hours 450] [--repeats 1] [--out bench-output/cold.json]

The shape of a backfill after an outage: 1M clickstream records (1% bad, 0.5% duplicates) whose event times
span --span-hours hours, all waiting when the job starts. Each side is started as its own Python process
and timed from the parent, start to exit, JVM start-up, session, planning and JIT included:
  bare:   bench/bench_streaming.py's read-parse-write (from_json, event_date/event_hour, Parquet by hour) in a
          fresh local session (glue_jobs.local_runner.local_spark_session, the runner's own settings);
  runner: `python -m glue_jobs run-local --once --source-name clickstream --dataset clickstream`, as a user runs it (strict
          contract, dead letters, duplicate collapse, staged publish with commit markers, the streaming engine).
--repeats pairs (after --warmup unmeasured ones, none by default: the files were just written, so they are in the
page cache), alternating which side goes first. One pair by default: the row is judged on the median of three
`make bench` runs, each one pair (docs/performance.md "make bench's length" has the spread that allows it).
Reported: the medians and bare/runner (higher is better; the runner's share of bare speed).
Both sides must write the same hour partitions, and the runner's counts must reconcile with the generator's.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.rows import at_least, use_local_fs, write_result  # noqa: E402

TARGET_RATIO = 0.8  # bare/runner, whole processes, on either shape of records (0.75 before 2026-11-28)
_SUMMARY = re.compile(r"summary: records=(\d+) written=(\d+) dead_letters=(\d+) .*duplicates=(\d+)")


def bare_child(input_dir: str, out_dir: str) -> None:
    from bench.bench_streaming import bare_read_parse_write
    from glue_jobs.local_runner import local_spark_session

    spark = local_spark_session("streamlake-bench-cold-bare")
    try:
        bare_read_parse_write(spark, input_dir, out_dir)
    finally:
        spark.stop()


def timed_process(command: list[str], log: Path) -> tuple[float, str]:
    started = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, check=False)
    seconds = time.perf_counter() - started
    text = log.read_text()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {done.returncode}; see {log}")
    return seconds, text


def hour_partitions(root: Path) -> set[str]:
    return {f"{d.parent.name}/{d.name}" for d in root.glob("event_date=*/event_hour=*") if d.is_dir()}


def main(argv: list[str] | None = None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--span-hours", type=int, default=450)
    parser.add_argument("--repeats", type=int, default=1, help="measured pairs (default 1; make bench is run three times)")
    parser.add_argument("--warmup", type=int, default=0,
                        help="unmeasured pairs first (default 0: the generator has just written the files, so they are in "
                             "the page cache already; docs/performance.md \"make bench's length\")")
    parser.add_argument("--shape", choices=("generated", "producers"), default="generated",
                        help="records as the generator makes them, or shaped like producers' (glue_jobs/generate.PRODUCER_SHAPES)")
    parser.add_argument("--work", default="bench-output/cold")
    parser.add_argument("--out", default="bench-output/cold.json")
    parser.add_argument("--bare-child", nargs=2, metavar=("INPUT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_child:
        bare_child(*args.bare_child)
        return 0
    if min(args.records, args.files, args.span_hours, args.repeats) < 1 or args.warmup < 0:
        parser.error("--records, --files, --span-hours and --repeats must be at least 1, --warmup 0 or more")

    from glue_jobs.generate import generate

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    data = work / "input"
    started = time.perf_counter()
    expect = generate(data, records=args.records, files=args.files, bad_ratio=0.01, seed=13, span_hours=args.span_hours,
                      shape=args.shape)
    print(f"generated {args.records} records over {args.span_hours} hours in {time.perf_counter() - started:.1f} s", flush=True)

    def bare() -> float:
        out = work / "bare"
        shutil.rmtree(out, ignore_errors=True)
        seconds, _ = timed_process([sys.executable, __file__, "--bare-child", str(data), str(out)], work / "bare.log")
        return seconds

    def runner() -> tuple[float, dict]:
        run = work / "runner"
        shutil.rmtree(run, ignore_errors=True)
        seconds, text = timed_process(
            [sys.executable, "-m", "glue_jobs", "run-local", "--input", str(data), "--lake", str(run / "lake"),
             "--dead-letter", str(run / "dead"), "--checkpoint", str(run / "cp"), "--once", "--source-name", "clickstream",
             "--dataset", "clickstream"],
            work / "runner.log")
        match = _SUMMARY.search(text)
        if match is None:
            raise RuntimeError(f"no summary line in {work / 'runner.log'}")
        records, written, dead, duplicates = map(int, match.groups())
        return seconds, {"records_in": records, "records_written": written, "dead_letters": dead, "duplicates": duplicates}

    times: dict[str, list[float]] = {"bare": [], "runner": []}
    counts: dict = {}
    for number in range(args.warmup + args.repeats):
        pair: dict[str, float] = {}
        for side in (("runner", "bare") if number % 2 else ("bare", "runner")):
            if side == "bare":
                pair["bare"] = bare()
            else:
                pair["runner"], counts = runner()
        if number >= args.warmup:
            for side, seconds in pair.items():
                times[side].append(seconds)
        label = f"repeat {number - args.warmup + 1}" if number >= args.warmup else "warm-up (not counted)"
        print(f"{label}: bare {pair['bare']:.1f} s, runner {pair['runner']:.1f} s", flush=True)

    bare_hours, runner_hours = hour_partitions(work / "bare"), hour_partitions(work / "runner" / "lake")
    reconciles = (counts["records_in"] == args.records
                  and counts["records_written"] == len(expect.valid_event_ids)
                  and counts["dead_letters"] == len(expect.bad_lines)
                  and counts["duplicates"] == expect.duplicates)
    if not reconciles or runner_hours - bare_hours:
        print(f"the runner's output does not add up: counts {counts}, expected {len(expect.valid_event_ids)} valid, "
              f"{len(expect.bad_lines)} bad, {expect.duplicates} duplicates; hours only the runner wrote: "
              f"{sorted(runner_hours - bare_hours)[:5]}", file=sys.stderr)
        return 1
    bare_median, runner_median = statistics.median(times["bare"]), statistics.median(times["runner"])
    ratio = bare_median / runner_median
    result = {
        "records": args.records, "files": args.files, "span_hours": args.span_hours, "hour_partitions": len(runner_hours),
        "repeats": args.repeats, "warmup": args.warmup, "bare_seconds": [round(t, 2) for t in times["bare"]],
        "runner_seconds": [round(t, 2) for t in times["runner"]], "bare_median_seconds": round(bare_median, 2),
        "runner_median_seconds": round(runner_median, 2), "ratio": round(ratio, 3), "runner_counts": counts,
        "shape": args.shape, "shapes": expect.shapes,
        "rows": [at_least(f"cold backfill, whole process: runner/bare ({args.records:,} records"
                          f"{' shaped like producers' if args.shape == 'producers' else ''} over "
                          f"{len(runner_hours)} hour partitions; bare {bare_median:.1f} s, runner {runner_median:.1f} s)",
                          round(ratio, 3), TARGET_RATIO)],
    }
    write_result(Path(args.out), result)
    print(f"bare median {bare_median:.1f} s, runner median {runner_median:.1f} s: bare/runner {ratio:.3f} "
          f"(target >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'NOT met'}); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
