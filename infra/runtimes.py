"""The Glue versions this project allows, per job kind, with what each one runs and where that is written.

Pure data (no CDK import): the config validation, the job definitions, the sizing, the rehearsal and the
tests read it. Every fact cites the AWS page it comes from.

Versions and runtimes (Appendix A of "Migrating AWS Glue for Spark jobs to AWS Glue version 6.0",
docs.aws.amazon.com/glue/latest/dg/migrating-version-60.html, and the "AWS Glue versions" page,
release-notes.html, which also says "AWS Glue 5.1 is the default version for jobs created without
specifying an AWS Glue version"):

| Glue | Spark | Python | Java | default S3 connector |
|---|---|---|---|---|
| 4.0 | 3.3.0 | 3.10 | 8 | EMRFS ("upgraded EMR File System (EMRFS) ... by default", migrating-version-40.html) |
| 5.0 | 3.5.4 | 3.11 | 17 | EMRFS (5.1's page: S3A "has replaced EMRFS") |
| 5.1 | 3.5.6 | 3.11 | 17 | S3A ("In AWS Glue 5.1, S3A filesystem has replaced EMRFS as the default S3 connector", migrating-version-51.html) |
| 6.0 | 4.1.1 | 3.13 | 17 | S3A ("EMRFS has been removed. S3A is the only S3 filesystem in AWS Glue 6.0", migrating-version-60.html) |

Job kinds:
- Batch (`glueetl`, the compaction job): every version above; Flex needs "Glue version 3.0 and above and
  command type glueetl" (Glue API, Job.ExecutionClass).
- Streaming (`gluestreaming`): 4.0 is named by the streaming auto-scaling page ("Glue 3.0 or Glue 4.0")
  and the Kinesis connection options this job uses ("AWS Glue 4.0 or later": addRecordTimestamp,
  emitConsumerLagMetrics, aws-glue-programming-etl-connect-kinesis-home.html); 5.0 and 5.1 carry every
  4.0 feature forward ("All existing job parameters and major features that exist in AWS Glue 4.0 will
  exist in AWS Glue 5.0, except machine learning transforms", migrating-version-50.html; the same for 5.1
  from 5.0, migrating-version-51.html), and no page excludes streaming from them; 6.0 names "Streaming
  enhancements" (migrating-version-60.html). No page found says outright "streaming on 5.0/5.1"; that is
  the inference above, flagged here.
- G.025X: "only available for AWS Glue version 3.0 or later streaming jobs" (Glue API, StartJobRun
  WorkerType). The worker-types page no longer lists it; whether 5.x/6.0 accept it is unverified.

Which versions the config accepts is decided by what is tested here, not only by what AWS documents:
a version is allowed when its Spark line runs the job tests in `make test` (LOCAL_SPARK_LINES).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GlueRuntime:
    version: str
    spark: str  # the Spark line ("3.3"): the local tests run on a pinned pyspark of this line
    python: str
    java: str
    s3_connector: str  # "EMRFS" or "S3A": what s3:// paths go through on this version
    streaming: bool  # documented for gluestreaming jobs (module docstring)
    rehearsable: bool  # AWS's awsglue package for it installs on this machine's Python 3.11


# AWSGlueDataplanePython 5.0.0 and 5.1.0 need Python >=3.11,<3.12; 6.0.0 needs >=3.13,<3.14 (PyPI
# metadata), and only 3.11 can be installed here: 6.0 gets the Spark tests, not the deploy rehearsal.
RUNTIMES: dict[str, GlueRuntime] = {
    r.version: r
    for r in (
        GlueRuntime("4.0", spark="3.3", python="3.10", java="8", s3_connector="EMRFS", streaming=True, rehearsable=True),
        GlueRuntime("5.0", spark="3.5", python="3.11", java="17", s3_connector="EMRFS", streaming=True, rehearsable=True),
        GlueRuntime("5.1", spark="3.5", python="3.11", java="17", s3_connector="S3A", streaming=True, rehearsable=True),
        GlueRuntime("6.0", spark="4.1", python="3.13", java="17", s3_connector="S3A", streaming=True, rehearsable=False),
    )
}
# The Spark lines `make test` runs the job tests on, each from its own pinned environment.
LOCAL_SPARK_LINES = {"3.3": "requirements-spark33.txt", "3.5": "requirements-dev.txt", "4.1": "requirements-spark41.txt"}

STREAMING_GLUE_VERSIONS = tuple(v for v, r in RUNTIMES.items() if r.streaming and r.spark in LOCAL_SPARK_LINES)
BATCH_GLUE_VERSIONS = tuple(v for v, r in RUNTIMES.items() if r.spark in LOCAL_SPARK_LINES)


def runtime(version: str) -> GlueRuntime:
    return RUNTIMES[version]


def emrfs(version: str) -> bool:
    """Whether s3:// goes through EMRFS, which writes `<folder>_$folder$` marker objects (infra/job_iam.py)."""
    return RUNTIMES[version].s3_connector == "EMRFS"
