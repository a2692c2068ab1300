"""Helpers of the Iceberg tests (tests/spark/test_iceberg_lake.py, test_unknown_fields.py): a datasets folder
whose orders dataset says iceberg, the local runner and generator as subprocesses, and pyiceberg over the local
catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from glue_jobs.lake.iceberg_lake import BATCH_PROPERTY
from glue_jobs.local_runner import LOCAL_ICEBERG_NAMESPACE

REPO = Path(__file__).resolve().parents[2]
DATASET = "orders"


def iceberg_datasets(tmp_path: Path) -> Path:
    """A datasets folder whose orders dataset says iceberg: the team's only change (the `iceberg_orders` fixture),
    made as `make demo` makes it."""
    from devtools.iceberg_demo import switch

    return switch(tmp_path / "datasets", DATASET)


def _env(datasets: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_DATASETS": str(datasets),
            "STREAMLAKE_SPARK_MASTER": "local[2]", "STREAMLAKE_DRIVER_MEMORY": "1g", **extra}


def _runner(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "glue_jobs", "run-local", "--dataset", DATASET, "--input", str(tmp_path / "in"),
            "--lake", str(tmp_path / "lake"), "--dead-letter", str(tmp_path / "dead"), "--checkpoint", str(tmp_path / "cp"),
            "--max-files-per-batch", "1", *extra]


def _generate(datasets: Path, out: Path, *, records: int, files: int, seed: int) -> dict:
    expect = out.parent / f"expect-{seed}.json"
    done = subprocess.run([sys.executable, "-m", "glue_jobs", "generate", "--dataset", DATASET, "--out", str(out),
                           "--records", str(records), "--files", str(files), "--seed", str(seed), "--expect", str(expect)],
                          env=_env(datasets), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(expect.read_text())


def _catalog(tmp_path: Path):
    from devtools.iceberg_demo import local_catalog

    return local_catalog(tmp_path / "lake")


def _pyiceberg_table(tmp_path: Path):
    return _catalog(tmp_path).load_table(f"{LOCAL_ICEBERG_NAMESPACE}.{DATASET}")


def _tags(table) -> list[str]:
    return [s.summary.additional_properties.get(BATCH_PROPERTY) for s in table.snapshots()]


def _spark_read(tmp_path: Path, datasets: Path, before: str = "") -> dict:
    """The table as Spark reads it through the Iceberg catalog (a session of its own, with the runtime, `s`), after
    the Python of `before` ran in that session; its printed lines are `stdout`."""
    script = ("import json,sys\nfrom glue_jobs.local_runner import local_spark_session\n"
              f"s = local_spark_session(iceberg_warehouse={str(tmp_path / 'lake')!r})\n" + before +
              f"t = s.table('lake.{LOCAL_ICEBERG_NAMESPACE}.{DATASET}')\n"
              "from glue_jobs.lake.iceberg_lake import IcebergTarget, existing_keys\n"
              "from glue_jobs.lake.lake_table import LakeTable\n"
              f"plan = existing_keys(s, LakeTable.of({DATASET!r}), IcebergTarget('lake', {LOCAL_ICEBERG_NAMESPACE!r}, "
              f"{DATASET!r}), 1763596800000, 1763600400000)._jdf.queryExecution().executedPlan().toString()\n"
              "print(json.dumps({'rows': t.count(), 'keys': t.select('order_id').distinct().count(),"
              " 'items': t.selectExpr('sum(size(items))').first()[0], 'plan': plan}))\n")
    done = subprocess.run([sys.executable, "-c", script], env=_env(datasets), capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    *printed, last = done.stdout.strip().splitlines()
    return {**json.loads(last), "stdout": "\n".join(printed)}


def _data_files(tmp_path: Path) -> set[Path]:
    return set((tmp_path / "lake" / LOCAL_ICEBERG_NAMESPACE / DATASET / "data").rglob("*.parquet"))


