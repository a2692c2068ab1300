"""Spark settings of the job code: the static ones every session that runs it starts with (Glue, the local
runner, the tests), and SQL settings changed for one piece of work and restored afterwards."""

from __future__ import annotations

import contextlib

# Spark's default codegen cache (100 classes, read once per JVM) is smaller than what one micro-batch generates,
# so every batch compiled stages again and ran them cold; the cache holds only what a job runs, so a larger
# bound costs nothing until needed. Measurements: docs/streaming-job.md ("Benchmark history").
CODEGEN_CACHE_ENTRIES = 1000


# Dates and timestamps before 1582-10-15 (and timestamps before 1900 in INT96) are written and read as they are, in
# the proleptic Gregorian calendar Avro, Java, pyarrow and Iceberg use. Spark 3.x's default for these is EXCEPTION: a
# valid record with such a date failed its batch with INCONSISTENT_BEHAVIOR_CROSS_VERSION.WRITE_ANCIENT_DATETIME, on
# every retry, and stopped its source for good (Spark SQL migration guide, 3.0 to 3.1: "datetimeRebaseModeInWrite ...
# EXCEPTION"; Spark 4.0 made CORRECTED the default, SPARK-46440). Glue 4.0 and 5.x run Spark 3.3 and 3.5, and no AWS
# page says Glue changes these defaults.
CALENDAR_SETTINGS = {
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    "spark.sql.avro.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.avro.datetimeRebaseModeInWrite": "CORRECTED",
}


def job_spark_conf():
    """The settings every session that runs the job code starts with (Glue's SparkContext in glue_entry,
    local_runner.local_spark_session, the test suite's session): the codegen cache and CALENDAR_SETTINGS. Spark reads
    the static ones once, when the SparkContext is created, so a session that exists already keeps what it has."""
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).set("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
    return conf.setAll(list(CALENDAR_SETTINGS.items()))


def connector_jars() -> list[str]:
    """Spark's Kafka source and Avro functions for this pyspark's line: build/jars/spark-<major>.<minor>/, which
    `make bootstrap` fetches from Maven Central as jvm/jars.lock pins them (devtools/jars.py). [] where they
    are absent (the job zip on Glue, whose runtime brings its own connectors)."""
    from pathlib import Path

    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    repository = Path(__file__).resolve().parent.parent
    jars = sorted(str(p) for p in (repository / "build" / "jars" / f"spark-{line}").glob("*.jar"))
    functions = functions_jar()
    return jars + ([functions] if functions else [])


def functions_jar() -> str | None:
    """The project's own JVM functions (jvm/glue-functions: the Kafka job's frame decoder, the typed JSON proof, the
    bulk delete, the local file system) as infra/jvm_functions.py last built them (make bootstrap; the test session builds them
    first); None where absent (the job zip on Glue gets them through --extra-jars). Without it the Kafka path says so."""
    from pathlib import Path

    jar = Path(__file__).resolve().parent.parent / "build" / "jvm" / "glue-functions.jar"
    return str(jar) if jar.exists() else None


# Hadoop's local file system starts a `chmod` process for every file and directory it creates when its native library
# is absent (pyspark ships none); FORKLESS_LOCAL_FS (jvm/glue-functions) sets the same permissions through java.nio.
# Local sessions only: on Glue the lake is on S3. STREAMLAKE_LOCAL_FS=hadoop keeps Hadoop's own, as `make bench` does
# (its cost per file stands in for the object store's). Figures: docs/performance.md.
FORKLESS_LOCAL_FS = "com.streamlake.glue.ForklessLocalFileSystem"
LOCAL_FS_VARIABLE = "STREAMLAKE_LOCAL_FS"
LOCAL_FS_CHOICES = ("forkless", "hadoop")


def forkless_local_fs() -> bool:
    """Whether local sessions use FORKLESS_LOCAL_FS: LOCAL_FS_VARIABLE unset or "forkless"; "hadoop" keeps Hadoop's."""
    import os

    chosen = os.environ.get(LOCAL_FS_VARIABLE, "forkless")
    if chosen not in LOCAL_FS_CHOICES:
        raise ValueError(f"{LOCAL_FS_VARIABLE}={chosen!r}: expected one of {', '.join(LOCAL_FS_CHOICES)}")
    return chosen == "forkless"


def local_fs_settings(jar: str | None) -> dict[str, str]:
    """The settings that make `file:` paths use FORKLESS_LOCAL_FS from `jar` ({} without a jar or when Hadoop's own is
    chosen). The jar goes on the driver's class path, not only spark.jars: Spark opens `file:` paths while it starts,
    before spark.jars are loaded."""
    if jar is None or not forkless_local_fs():
        return {}
    return {"spark.driver.extraClassPath": jar, "spark.hadoop.fs.file.impl": FORKLESS_LOCAL_FS}


# The local Iceberg catalog's name in Spark (`lake.<namespace>.<table>`); on Glue the catalog is the Data Catalog.
LOCAL_ICEBERG_CATALOG = "lake"


def iceberg_jars() -> list[str]:
    """Iceberg's Spark runtime and SQLite's JDBC driver for this pyspark's line (build/jars/iceberg-<line>/, fetched
    by `make bootstrap`); [] where absent."""
    from pathlib import Path

    import pyspark

    line = ".".join(pyspark.__version__.split(".")[:2])
    repository = Path(__file__).resolve().parent.parent
    return sorted(str(p) for p in (repository / "build" / "jars" / f"iceberg-{line}").glob("*.jar"))


# The Data Catalog as Spark's Iceberg catalog in a Glue job (the name Glue's Iceberg page uses).
GLUE_ICEBERG_CATALOG = "glue_catalog"


def glue_iceberg_settings(warehouse: str) -> dict[str, str]:
    """A Glue job's Iceberg settings: the values Glue's "Using the Iceberg framework in AWS Glue" page gives (the
    extensions, SparkCatalog with GlueCatalog and S3FileIO, the warehouse), plus no table cache, for the reason
    local_iceberg_settings gives, and no archived table version per commit: Iceberg 1.0.0 (Glue 4.0's) defaults
    `glue.skip-archive` to false, so every commit (one a micro-batch) keeps an old version of the Data Catalog table,
    and Glue's quota of table versions then fails every commit (apache/iceberg issue 5965; PR 6916 made true the
    default in a later release)."""
    prefix = f"spark.sql.catalog.{GLUE_ICEBERG_CATALOG}"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": warehouse,
        f"{prefix}.catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.cache-enabled": "false",
        f"{prefix}.glue.skip-archive": "true",
    }


def local_iceberg_settings(warehouse: str) -> dict[str, str]:
    """Static settings of a local session that writes Iceberg: the SQL extensions (MERGE, procedures) and a JDBC
    catalog on SQLite (`<warehouse>/catalog.sqlite`) over `warehouse`, one both Spark and pyiceberg's SQL catalog
    read (docs/iceberg.md). Iceberg's own catalog settings: iceberg.apache.org "Spark Configuration", JDBC catalog."""
    from pathlib import Path

    root = Path(warehouse).resolve()
    root.mkdir(parents=True, exist_ok=True)  # SQLite creates the catalog file, not its folder
    prefix = f"spark.sql.catalog.{LOCAL_ICEBERG_CATALOG}"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        # WAL journal: a reader never blocks a writer. The streaming query's clone session has a catalog instance
        # (and connections) of its own; in SQLite's default rollback journal its commit failed with SQLITE_BUSY
        # whenever the job's own session had used the catalog first, with no other process on the file (a read
        # lock kept by the first instance's connection; where Iceberg 1.7.1's JDBC catalog keeps it: unverified).
        f"{prefix}.uri": f"jdbc:sqlite:{root / 'catalog.sqlite'}?journal_mode=WAL",
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": root.as_uri(),
        # Every read loads the table's current metadata: a streaming query plans its batches in a clone of the
        # session, with a catalog (and a table cache) of its own, so a cached table in the job's session would not
        # see the batches the query committed (the duplicate check read a stale table before this).
        f"{prefix}.cache-enabled": "false",
    }


def local_session(app_name: str, *, master: str, settings: dict[str, str] | None = None,
                  iceberg_warehouse: str | None = None):
    """A local SparkSession for the job code outside Glue: the local runner, the compaction CLI, the test
    suite, the benchmarks and the tools all start here. It has the job's static settings (job_spark_conf),
    UTC in the session and in the JVMs (Glue runs in UTC), no UI, quiet logs, plus `settings`. Spark reads
    the static settings and JVM options once, when the first session of the process starts; a later call
    gets that session as it is. `iceberg_warehouse`: a directory for the local Iceberg catalog
    (local_iceberg_settings), for Iceberg datasets."""
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
    if iceberg_warehouse is not None:
        found = iceberg_jars()
        if not found:
            raise RuntimeError("Iceberg's Spark runtime is missing from build/jars/: run `make bootstrap`")
        jars += found
        settings = {**local_iceberg_settings(iceberg_warehouse), **(settings or {})}
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    settings = {**local_fs_settings(functions_jar()), **(settings or {})}
    for key, value in settings.items():
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
