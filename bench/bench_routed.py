"""Benchmark: one routed stream carrying three datasets, against the same records as three single-dataset sources in
one shared job.

    python bench/bench_routed.py [--records 4000] [--warmup 1] [--repeats 3] [--out bench-output/routed.json]

One process, one local Spark application with fair scheduling (as the Glue entrypoint starts it), on the local file
system `make bench` uses (bench/rows.py). The datasets are dev's routed stream's (page views and checkouts, in
datasets/) and docs/examples/routed's sensor readings, told apart by `kind`, copied into one folder under `--work`; each gets `--records` generated records (glue_jobs/dataset_generate.py, its seed,
bad and duplicate records included). Alternating, after `--warmup` unmeasured pairs:
  sources: three sources, each its dataset's records, their batches at once through run_sources (the shared job's
           own code: a thread and scheduler pool per source), timed until the last ends;
  routed:  one source holding all of the records, interleaved, through RoutedWriter (glue_jobs/routed_batch.py): the
           batch split by `kind`, each dataset's part at once in its own thread.
The row is the median of sources/routed over the measured pairs, target >= 0.9 (issue 60: routing costs little).
Measured on this machine (2 cores), not on Glue.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.rows import alternate, at_least, local_fs, use_local_fs, write_result  # noqa: E402

TARGET = 0.9
# Every `kind` the generator writes for a valid record (each dataset's enum symbols) routes to its dataset.
ROUTES = {"page_view": "page_views", "checkout": "checkouts", "refund_requested": "checkouts", "reading": "sensor_readings"}


def _metadata(checkpoint: Path) -> None:
    import json
    import uuid

    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")


def main(argv: list[str] | None = None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4000, help="records of each dataset (default 4000)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured pairs first (default 1)")
    parser.add_argument("--repeats", type=int, default=3, help="measured pairs, alternating (default 3)")
    parser.add_argument("--work", default="bench-output/routed", help="scratch folder (emptied first)")
    parser.add_argument("--out", default="bench-output/routed.json", help="where the JSON result goes")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--records and --repeats must be at least 1, --warmup 0 or more")

    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    for name in ("page_views", "checkouts", "sensor_readings"):  # one folder, set before any dataset is read
        shipped = REPO / "datasets" / name
        shutil.copytree(shipped if shipped.is_dir() else REPO / "docs" / "examples" / "routed" / "datasets" / name,
                        work / "datasets" / name)
    os.environ["STREAMLAKE_DATASETS"] = str(work / "datasets")

    from glue_jobs import datasets
    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.dataset_generate import generate_dataset
    from glue_jobs.decoding.routes import RouteTable
    from glue_jobs.local_runner import _session_settings
    from glue_jobs.metrics import LogMetricsSink
    from glue_jobs.routed_batch import DatasetTarget, RoutedWriter
    from glue_jobs.session import local_session, session_conf
    from glue_jobs.sources import from_local_files
    from glue_jobs.sources.source_queries import FAIR_SCHEDULING, run_sources

    routes = RouteTable.of("kind", ROUTES)
    names = routes.datasets
    lines = []
    for seed, name in enumerate(names, start=21):
        generate_dataset(datasets.load(name), work / "input" / name, records=args.records, files=1, seed=seed)
        lines += (work / "input" / name).glob("*.json*").__next__().read_text(encoding="utf-8").splitlines()
    random.Random(5).shuffle(lines)
    (work / "input" / "routed").mkdir()
    (work / "input" / "routed" / "events.json").write_text("\n".join(lines) + "\n", encoding="utf-8")

    spark = local_session("streamlake-bench-routed", master="local[2]", settings=dict(FAIR_SCHEDULING))
    spark.sparkContext.setLogLevel("ERROR")
    streaming_conf = {**_session_settings(spark), "spark.sql.adaptive.enabled": "false"}  # as bench_small_batch
    with session_conf(spark, streaming_conf):
        writers = {}
        for name in names:
            _metadata(work / "sources" / name / "cp")
            writers[name] = MicroBatchWriter(spark, source_name=name, lake_path=str(work / "sources" / name / "lake"),
                                             dead_letter_path=str(work / "sources" / name / "dead"),
                                             checkpoint_path=str(work / "sources" / name / "cp"), metrics=LogMetricsSink(),
                                             dataset=name)
        _metadata(work / "routed" / "cp")
        routed = RoutedWriter(spark, source_name="events", routes=routes, dead_letter_path=str(work / "routed" / "dead" / "unroutable"),
                              targets={name: DatasetTarget(str(work / "routed" / "lake" / name), str(work / "routed" / "dead" / name))
                                       for name in names},
                              checkpoint_path=str(work / "routed" / "cp"), metrics=LogMetricsSink())
        raws = {name: spark.read.format("text").option("wholetext", "true").load(str(work / "input" / name))
                for name in (*names, "routed")}
        batch_ids = iter(range(1_000_000))  # one batch id per pass, as a query's next batch
        counted: list[int] = []

        def sources() -> None:
            number = next(batch_ids)
            run_sources(spark.sparkContext, {name: (lambda name=name: writers[name](
                from_local_files(raws[name], name, int(time.time() * 1000)), number)) for name in names}, poll_seconds=0.05)

        def one_routed() -> None:
            every = routed(from_local_files(raws["routed"], "events", int(time.time() * 1000)), next(batch_ids))
            counted.append(sum(stats.records_in for stats in every))

        print("each pass: bare = three sources in one job, runner = one routed source", flush=True)
        timed, _ = alternate(sources, one_routed, warmup=args.warmup, repeats=args.repeats, spark=spark)
    if set(counted) != {len(lines)}:
        raise SystemExit(f"the routed batches read {sorted(set(counted))} records, not the {len(lines)} written")
    passes = {"sources": [round(t, 3) for t in timed["bare"]], "routed": [round(t, 3) for t in timed["runner"]]}
    ratio = statistics.median(s / r for s, r in zip(passes["sources"], passes["routed"], strict=True))
    row = at_least(f"three datasets x {args.records:,} records as three sources in one job, over the same records on one "
                   f"routed stream (warm, one process, {local_fs()})", round(ratio, 3), TARGET)
    write_result(Path(args.out), {"bench": "routed", "records": args.records, "warmup": args.warmup, "repeats": args.repeats,
                                  "passes": passes, "spark": spark.version, "rows": [row]})
    print(f"{row['row']}: {row['value']} (target >= {TARGET})", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
