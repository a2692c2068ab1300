"""Benchmark: an Iceberg dataset against the same dataset as Parquet (issue 35 asks for the figures).

    .venv/bin/python bench/bench_iceberg.py [--records 20000] [--files 10] [--repetitions 1]
                                            [--small-files 2000] [--out bench-output/iceberg.json]

1. Runner: the orders dataset's generated records streamed by the local runner (`python -m glue_jobs run-local
   --once`, one file per micro-batch), once as committed (Parquet) and once switched to Iceberg through its
   dataset.json, each run its own process, alternating (no warm-up run: nothing carries over between processes).
   Row: Iceberg / Parquet wall time, at most RUNNER_LIMIT: not a goal but a guard, so that a change which makes
   every Iceberg batch slower fails `make bench` (the row went from 1.14 to 1.61 between 2026-11-26 and 2026-12-01
   with nothing failing; docs/performance.md "Iceberg").
2. Small files: in one Iceberg-enabled session, `--small-files` files of one hour (bench/bench_compaction.py's
   rows) compacted by the hourly compaction (Parquet lake) and the same rows as `--small-files` data files of an
   Iceberg table maintained by compaction/iceberg_maintenance.py (rewrite, manifests, expiry, orphans), alternating
   after one warm-up each. Row: maintenance / compaction time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.rows import at_most, measured, use_local_fs, write_result  # noqa: E402

RUNNER_LIMIT = 1.6  # Iceberg / Parquet, whole processes (1.48 on 2026-12-01 after the differing check's fix)


def _switched(datasets: Path) -> Path:
    """A copy of datasets/ whose orders dataset says iceberg."""
    shutil.copytree(REPO / "datasets", datasets)
    contract = json.loads((datasets / "orders" / "dataset.json").read_text())
    (datasets / "orders" / "dataset.json").write_text(json.dumps({**contract, "table_format": "iceberg"}, indent=2))
    return datasets


def _run_runner(work: Path, inputs: Path, env: dict) -> float:
    for name in ("lake", "dead", "cp"):
        shutil.rmtree(work / name, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "glue_jobs", "run-local", "--dataset", "orders", "--input", str(inputs),
                           "--lake", str(work / "lake"), "--dead-letter", str(work / "dead"), "--checkpoint", str(work / "cp"),
                           "--once", "--max-files-per-batch", "1"], env=env, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return elapsed


def runner_rows(workdir: Path, records: int, files: int, repetitions: int) -> dict:
    datasets = _switched(workdir / "datasets")
    inputs = workdir / "orders-in"
    base = {**os.environ, "PYTHONPATH": str(REPO), "STREAMLAKE_SPARK_MASTER": "local[2]"}
    subprocess.run([sys.executable, "-m", "glue_jobs", "generate", "--dataset", "orders", "--out", str(inputs), "--records",
                    str(records), "--files", str(files), "--seed", "5"], env=base, cwd=REPO, check=True, capture_output=True)
    parquet_env, iceberg_env = base, {**base, "STREAMLAKE_DATASETS": str(datasets)}
    # No unmeasured pair first: each run is a whole process (nothing JIT-compiled carries over), and the generator has
    # just written the inputs, so they are in the page cache (docs/performance.md "make bench's length").
    parquet, iceberg = [], []
    for i in range(repetitions):
        order = [("parquet", parquet_env, parquet), ("iceberg", iceberg_env, iceberg)]
        for name, env, times in (order if i % 2 == 0 else order[::-1]):
            times.append(_run_runner(workdir / name, inputs, env))
        print(f"runner rep {i + 1}: parquet {parquet[-1]:.1f} s, iceberg {iceberg[-1]:.1f} s", flush=True)
    p, c = statistics.median(parquet), statistics.median(iceberg)
    return {"parquet_seconds": parquet, "iceberg_seconds": iceberg,
            "row": at_most(f"Iceberg runner / Parquet runner, orders {records:,} records in {files} batches, whole process "
                           f"(Parquet {p:.1f} s, Iceberg {c:.1f} s)", round(c / p, 3), RUNNER_LIMIT)}


def small_file_rows(workdir: Path, small_files: int, rows_per_file: int, repetitions: int) -> dict:
    """Compaction of `small_files` Parquet files against Iceberg maintenance of as many data files (one session)."""
    from bench.bench_compaction import HOUR, compaction, generate, reset
    from compaction.iceberg_maintenance import MaintenanceSettings, maintain
    from glue_jobs.lake.iceberg_lake import IcebergTarget
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.session import LOCAL_ICEBERG_CATALOG, local_session

    # Iceberg's vectorized (Arrow) Parquet reads crashed this machine's JVM (Debian OpenJDK 17.0.15) in three runs of
    # the 2,000-file rewrite: SIGSEGV in the C1 compiler compiling VectorizedDictionaryEncodedParquetValuesReader, then,
    # with that method excluded, in an executor building a NullPointerException's message (a corrupt object). The bench
    # reads Iceberg without vectorization (Iceberg's session property); docs/iceberg.md has the finding.
    spark = local_session("bench-iceberg", master="local[2]", iceberg_warehouse=str(workdir / "warehouse"),
                          settings={"spark.driver.memory": "2g", "spark.sql.iceberg.vectorization.enabled": "false"})
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(spark.sparkContext.defaultParallelism))
    pristine, lake = workdir / "pristine", workdir / "lake"
    generate(spark, pristine, small_files, rows_per_file)
    rows = spark.read.parquet(str(pristine)).cache()
    rows.count()
    target = IcebergTarget(LOCAL_ICEBERG_CATALOG, "bench", "small_files")
    settings = MaintenanceSettings(target_file_mb=4, snapshot_retention_hours=168)

    def iceberg_small_files() -> None:
        spark.sql(f"DROP TABLE IF EXISTS {target.name} PURGE")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {target.catalog}.{target.namespace}")
        spark.sql(f"CREATE TABLE {target.name} ({', '.join(f'`{f.name}` {f.dataType.simpleString()}' for f in rows.schema)}) "
                  "USING iceberg PARTITIONED BY (hours(event_time)) TBLPROPERTIES ('format-version'='2')")
        # One append whose every task writes one file of the hour: `small_files` data files, as many micro-batches
        # would leave (an append each would take as long again in commits, which maintenance never sees).
        rows.repartition(small_files).writeTo(target.name).append()

    def timed_maintenance() -> tuple[float, object]:
        iceberg_small_files()
        started = time.perf_counter()
        # The table holds clickstream's rows (bench_compaction's generator) under another name: maintenance's check
        # before expiry reads the dataset's key, and would otherwise look for a dataset named like the table.
        result = maintain(spark, target, settings, now=HOUR + timedelta(hours=2), lake_table=LakeTable.of("clickstream"))
        return time.perf_counter() - started, result

    def timed_compaction() -> float:
        reset(pristine, lake)
        seconds, _ = compaction(spark, lake, 4.0)
        return seconds

    timed_compaction()
    timed_maintenance()
    compactions, maintenances = [], []
    for i in range(repetitions):
        if i % 2:
            maintenances.append(timed_maintenance()[0])
        compactions.append(timed_compaction())
        if not i % 2:
            seconds, result = timed_maintenance()
            maintenances.append(seconds)
        print(f"small files rep {i + 1}: compaction {compactions[-1]:.2f} s, maintenance {maintenances[-1]:.2f} s", flush=True)
    c, m = statistics.median(compactions), statistics.median(maintenances)
    spark.stop()
    return {"compaction_seconds": compactions, "maintenance_seconds": maintenances, "maintenance": result.render(),
            "row": measured(f"Iceberg maintenance / compaction, {small_files:,} small files x {rows_per_file} rows of one hour "
                            f"(compaction {c:.2f} s, maintenance {m:.2f} s)", round(m / c, 3))}


def main(argv=None) -> int:
    use_local_fs()  # before any session or process of this benchmark (bench/rows.py)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--rows-per-file", type=int, default=500)
    # One of each by default: the rows have no targets, and make bench is run three times (docs/performance.md
    # "make bench's length"); more for a figure of its own.
    parser.add_argument("--repetitions", type=int, default=1, help="measured runner pairs and small-file pairs (default 1)")
    parser.add_argument("--out", default="bench-output/iceberg.json")
    parser.add_argument("--parts", default="runner,small-files", help="which measurements (comma-separated)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    if not parts or parts - {"runner", "small-files"}:
        parser.error(f"--parts {args.parts!r}: choose from runner, small-files")
    workdir = Path(tempfile.mkdtemp(prefix="bench-iceberg-"))
    try:
        result = {}
        if "runner" in parts:
            result["runner"] = runner_rows(workdir / "runner", args.records, args.files, args.repetitions)
        if "small-files" in parts:
            result["small_files"] = small_file_rows(workdir / "small", args.small_files, args.rows_per_file, args.repetitions)
        result["rows"] = [part["row"] for part in result.values()]
        write_result(Path(args.out), result)
        for row in result["rows"]:
            print(f"{row['row']}: {row['value']}")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
