"""The local SparkSession of the test suite, built the same way wherever a test starts the JVM first
(tests/spark's fixture or an operations test): the job's static settings (glue_jobs.session.job_spark_conf,
as in Glue and the local runner), local[2], UTC (JVM and session), few shuffle partitions, no UI. Spark
reads the JVM options, jars and static settings once, when the first session starts; a later builder gets that
session as it is."""

from __future__ import annotations


def shared_spark_session():
    from glue_jobs.session import local_session
    from infra import jvm_functions

    jvm_functions.jar_path()  # the project's JVM functions of the current sources, on the classpath of the JVM about to start

    return local_session("streamlake-tests", master="local[2]",
                         settings={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
