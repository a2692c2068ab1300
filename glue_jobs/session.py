"""Spark settings of the job code: the static ones every session that runs it starts with (Glue, the local
runner, the tests), and SQL settings changed for one piece of work and restored afterwards."""

from __future__ import annotations

import contextlib

# Spark's default codegen cache (100 classes, read once per JVM) is smaller than what one micro-batch generates,
# so every batch compiled stages again and ran them cold; the cache holds only what a job runs, so a larger
# bound costs nothing until needed. Measurements: docs/streaming-job.md ("Benchmark history").
CODEGEN_CACHE_ENTRIES = 1000


def job_spark_conf():
    """The settings every session that runs the job code starts with (Glue's SparkContext in glue_entry,
    local_runner.local_spark_session, the test suite's session). They are static: Spark reads them once,
    when the SparkContext is created, so a session that exists already keeps what it has."""
    from pyspark import SparkConf

    return SparkConf(loadDefaults=False).set("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))


def connector_jars() -> list[str]:
    """Spark's Kafka source and Avro functions for this pyspark's line: build/jars/spark-<major>.<minor>/, which
    `make bootstrap` fetches from Maven Central as jvm/jars.lock pins them (devtools/jars.py). [] where they
    are absent (the job zip on Glue, whose runtime brings its own connectors)."""
    from pathlib import Path

    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    repository = Path(__file__).resolve().parent.parent
    jars = sorted(str(p) for p in (repository / "build" / "jars" / f"spark-{line}").glob("*.jar"))
    # The project's own JVM functions (jvm/glue-functions: the Kafka job's frame decoder) as infra/jvm_functions.py
    # last built them (make bootstrap; the test session builds them first). Without it the Kafka path says so.
    functions = repository / "build" / "jvm" / "glue-functions.jar"
    return jars + ([str(functions)] if functions.exists() else [])


def local_session(app_name: str, *, master: str, settings: dict[str, str] | None = None):
    """A local SparkSession for the job code outside Glue: the local runner, the compaction CLI, the test
    suite, the benchmarks and the tools all start here. It has the job's static settings (job_spark_conf),
    UTC in the session and in the JVMs (Glue runs in UTC), no UI, quiet logs, plus `settings`. Spark reads
    the static settings and JVM options once, when the first session of the process starts; a later call
    gets that session as it is."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.config(conf=job_spark_conf())
        .master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    jars = connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextlib.contextmanager
def session_conf(spark, settings: dict[str, str]):
    """The SQL settings in `settings` for the duration of the block; afterwards (also after an error) each
    key is back as it was: its earlier value, or unset. Spark reads most of them when a query is planned
    (a cache defined, a micro-batch planned), so the block must cover that, not only the action."""
    conf = spark.conf
    previous = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)
