"""How many Spark jobs one micro-batch of the local runner starts, counted from Spark's own event log.

    python -m devtools.batch_jobs [--dataset clickstream] [--records 4000] [--batches 4]

Generates `--batches` input files of `--records` records each (the dataset's generator, 1% bad, 0.5% duplicates),
runs `run-local --once --max-files-per-batch 1` over them in this process with Spark's event log on
(`spark.eventLog.enabled`), and reads the log back: every SparkListenerJobStart whose properties carry
`streaming.sql.batchId` (the property Spark's micro-batch execution sets for the jobs of a batch) belongs to that
batch. Prints each batch's job count and each job's call site (its last stage's name), and the median count over
the batches after the first (the first also plans the query). Runs against whatever glue_jobs is on the path, so
the same script counts an older tree's jobs: `PYTHONPATH=<that tree> python <this file>`.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

BATCH_PROPERTY = "streaming.sql.batchId"


def jobs_per_batch(event_log: Path) -> dict[int, list[str]]:
    """batch id -> the call sites of its jobs, in start order, from one Spark event log file (JSON lines)."""
    found: dict[int, list[str]] = defaultdict(list)
    for line in event_log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("Event") != "SparkListenerJobStart":
            continue
        batch = (event.get("Properties") or {}).get(BATCH_PROPERTY)
        if batch is None:
            continue
        stages = event.get("Stage Infos") or [{}]
        last = max(stages, key=lambda stage: stage.get("Stage ID", -1))
        found[int(batch)].append(str(last.get("Stage Name", "?")).split(" at ")[0])
    return dict(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.batch_jobs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="clickstream", help="the dataset whose records to run (default clickstream)")
    parser.add_argument("--records", type=int, default=4000, help="records per micro-batch (default 4000)")
    parser.add_argument("--batches", type=int, default=4, help="micro-batches (default 4)")
    args = parser.parse_args(argv)
    if args.records < 1 or args.batches < 2:
        parser.error("--records must be at least 1 and --batches at least 2")
    from glue_jobs.local_runner import run_local
    from glue_jobs.session import local_session

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "events").mkdir()
        total = args.records * args.batches
        if args.dataset == "clickstream":
            from glue_jobs.generate import generate

            generate(work / "in", records=total, files=args.batches, seed=3)
        else:
            from glue_jobs import datasets
            from glue_jobs.dataset_generate import generate_dataset

            generate_dataset(datasets.load(args.dataset), work / "in", records=total, files=args.batches, seed=3)
        spark = local_session("batch-jobs", master="local[2]", settings={
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": (work / "events").as_uri(),
            "spark.eventLog.compress": "false"})
        try:
            options = dict(input_dir=str(work / "in"), lake_dir=str(work / "lake"), dead_letter_dir=str(work / "dead"),
                           checkpoint_dir=str(work / "cp"), once=True, max_files_per_batch=1, dataset=args.dataset,
                           spark=spark, progress=False, out=sys.stderr)
            accepted = inspect.signature(run_local).parameters  # an older tree's run_local has fewer options
            run_local(**{name: value for name, value in options.items() if name in accepted})
        finally:
            spark.stop()
        (log,) = [p for p in (work / "events").iterdir() if p.is_file()]
        batches = jobs_per_batch(log)
    for batch, sites in sorted(batches.items()):
        print(f"batch {batch}: {len(sites)} jobs: {', '.join(sites)}")
    later = [len(sites) for batch, sites in batches.items() if batch > min(batches)]
    print(f"{args.dataset}: median {statistics.median(later):g} Spark jobs per micro-batch of {args.records} records "
          f"(batches after the first: {later})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
