"""The local SparkSession of the test suite, built the same way wherever a test starts the JVM first
(tests/spark's fixture or an operations test): the job's static settings (glue_jobs.session.job_spark_conf,
as in Glue and the local runner), local[2], UTC (JVM and session), few shuffle partitions, no UI. Spark
reads the JVM options and static settings once, when the first session starts; a later builder gets that
session as it is."""

from __future__ import annotations

import os
import sys


def shared_spark_session():
    from pyspark.sql import SparkSession

    from glue_jobs.session import job_spark_conf

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.config(conf=job_spark_conf())
        .master("local[2]")
        .appName("streamlake-tests")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
