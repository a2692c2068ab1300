"""Run one deployed Glue job in a fresh process, as Glue would, against local stand-ins.

- argv: the script, Glue's own `--JOB_ID`/`--JOB_RUN_ID`/`--JOB_NAME`, then every DefaultArgument as
  `--name value`, with a run's arguments replacing defaults of the same name ("Arguments ... replace
  the default arguments set in the job definition itself", StartJobRun,
  https://docs.aws.amazon.com/glue/latest/webapi/API_StartJobRun.html). s3:// locations become folders
  of a LocalS3 root (pyspark ships no S3 file system), also inside an argument holding a JSON object;
  `--extra-py-files` becomes the zip's local copy.
- An argument is either one of Glue's documented special parameters (GLUE_PARAMETERS) or one the
  deployed script reads (its `job_arguments()`); anything else fails the rehearsal before the run.
- The process: `python -S` (no site-packages) with PYTHONPATH = script folder, zip, runtime folder;
  the Spark JVM gets the stand-in jar on its driver class path; the CloudWatch client reaches the moto
  server through AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from glue_jobs.session import FORKLESS_LOCAL_FS, forkless_local_fs
from rehearsal.assembly import REGION, GlueJob, RehearsalError
from rehearsal.runtime import SparkLine, iceberg_jars, iceberg_standin_jar, runtime_folder, standin_jar

# Glue's special job parameters this project's jobs set or Glue passes, from "Using job parameters in AWS
# Glue jobs" (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-glue-arguments.html).
GLUE_PARAMETERS = frozenset({
    "--JOB_ID", "--JOB_RUN_ID", "--JOB_NAME", "--TempDir", "--job-language", "--extra-py-files", "--extra-jars",
    "--extra-files", "--enable-metrics", "--enable-observability-metrics", "--enable-continuous-cloudwatch-log",
    "--enable-continuous-log-filter", "--continuous-log-logGroup", "--enable-auto-scaling", "--enable-spark-ui",
    "--spark-event-logs-path", "--job-bookmark-option", "--enable-job-insights", "--enable-glue-datacatalog",
    "--additional-python-modules", "--python-modules-installer-option", "--datalake-formats",
    # Glue 5.x's log group prefix ("Logging for AWS Glue jobs"; infra/glue_security.GlueJobSecurity.job_logging).
    "--custom-logGroup-prefix",
})


@dataclass
class LocalS3:
    """s3://bucket/key -> <root>/bucket/key (a trailing slash kept)."""

    root: Path

    def path(self, uri: str) -> str:
        if not uri.startswith("s3://"):
            raise RehearsalError(f"{uri!r} is not an s3:// location")
        return str(self.root / uri[len("s3://"):]) + ("/" if uri.endswith("/") else "")

    def localize(self, value: str) -> str:
        """An s3:// argument as its folder; in an argument holding a JSON object or list (compaction's --lake_tables
        and --iceberg_tables, a streaming job's --sources), each s3:// string in it, at any depth, likewise."""
        if value.startswith(("{", "[")):
            try:
                document = json.loads(value)
            except ValueError:
                return value
            if isinstance(document, dict | list):
                return json.dumps(self._localized(document), separators=(",", ":"))
        return self.path(value) if value.startswith("s3://") else value

    def _localized(self, node):
        if isinstance(node, dict):
            return {key: self._localized(value) for key, value in node.items()}
        if isinstance(node, list):
            return [self._localized(value) for value in node]
        return self.path(node) if isinstance(node, str) and node.startswith("s3://") else node


def iceberg_catalog_file(workdir: Path) -> Path:
    """The SQLite file of the stood-in Iceberg catalog (the Data Catalog's place) of a rehearsal's workdir."""
    folder = workdir / "iceberg-catalog"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "catalog.sqlite"


@dataclass
class JobRun:
    job: GlueJob
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    report: list[dict] = field(default_factory=list)
    stopped: bool = False  # stopped by the rehearsal (a streaming job never ends on its own)
    seconds: float = 0.0

    def events(self, kind: str) -> list[dict]:
        return [e for e in self.report if e.get("event") == kind]


def deployed_script_arguments(job: GlueJob) -> set[str]:
    """The arguments the deployed script reads: its own `job_arguments(...)`, loaded from the script asset."""
    spec = importlib.util.spec_from_file_location(f"rehearsal_script_{job.logical_id}", job.script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {f"--{name}" for name in module.job_arguments()}


def check_arguments(job: GlueJob, arguments: Mapping[str, str]) -> None:
    read = deployed_script_arguments(job)
    unknown = sorted(set(arguments) - GLUE_PARAMETERS - read)
    if unknown:
        raise RehearsalError(f"{job.logical_id}: argument(s) {unknown} are neither Glue job parameters nor read by the script")


def job_argv(job: GlueJob, s3: LocalS3, zip_copies: list[Path], run_arguments: Mapping[str, str] | None) -> list[str]:
    arguments = {**job.arguments, **(run_arguments or {})}
    check_arguments(job, arguments)
    arguments["--extra-py-files"] = ",".join(map(str, zip_copies))
    argv = ["--JOB_ID", f"j_{job.logical_id}", "--JOB_RUN_ID", f"jr_rehearsal_{int(time.time())}",
            "--JOB_NAME", job.logical_id]
    for name, value in arguments.items():
        argv += [name, s3.localize(value)]
    return argv


@dataclass
class StartedJob:
    """A job process started by `start_job`: its report can be read while it runs."""

    job: GlueJob
    argv: list[str]
    process: subprocess.Popen
    report_path: Path
    log_out: Path
    log_err: Path
    started: float

    def report(self) -> list[dict]:
        if not self.report_path.exists():
            return []
        lines = self.report_path.read_text(encoding="utf-8").splitlines()
        # The last line may be half written while the job runs.
        return [json.loads(text) for text in lines if text.strip() and _whole_json(text)]

    def finish(self, *, stop_signal: int | None = None) -> JobRun:
        """Wait for the process (after sending `stop_signal` to its process group, if given)."""
        stopped = stop_signal is not None
        try:
            if stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, stop_signal)
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=60)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # the Spark JVM, if it outlived the driver
        events = self.report()
        self.report_path.unlink(missing_ok=True)
        return JobRun(self.job, self.argv, self.process.returncode, self.log_out.read_text(), self.log_err.read_text(),
                      events, stopped, time.time() - self.started)


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def start_job(
    job: GlueJob,
    *,
    line: SparkLine,
    workdir: Path,
    s3: LocalS3,
    tables: Mapping[str, dict] | None = None,
    run_arguments: Mapping[str, str] | None = None,
    moto_endpoint: str | None = None,
    driver_memory: str = "1g",
    cores: int = 2,
    observe_source_reads: bool = False,
) -> StartedJob:
    """Start the job's script as deployed, in its own process group (see the module docstring)."""
    build = workdir / "build"
    build.mkdir(parents=True, exist_ok=True)
    runtime = runtime_folder(line, build)
    jar = standin_jar(line, build)
    deployed = workdir / "deployed" / job.logical_id
    deployed.mkdir(parents=True, exist_ok=True)
    script = deployed / job.script.name
    shutil.copyfile(job.script, script)
    zips = []
    for extra in job.extra_py_files:
        copy = deployed / f"{extra.name}"
        shutil.copyfile(extra, copy)
        zips.append(copy)
    argv = job_argv(job, s3, zips, run_arguments)
    # --extra-jars as Glue loads them (the deployed asset files), and for a Kafka job Spark's Kafka source of the
    # line: a stand-in for Glue's own classpath, where the connector is assumed present (unverified: docs/kafka.md).
    jars = []
    for extra in job.extra_jars:
        copy = deployed / extra.name
        shutil.copyfile(extra, copy)
        jars.append(copy)
    if any(source.arguments["--source_type"] == "kafka" for source in job.sources):
        from devtools.jars import JARS_DIR

        connector = sorted((JARS_DIR / f"spark-{line.spark_line}").glob("*.jar"))
        if not connector:
            raise RehearsalError(f"no Spark Kafka connector jars in {JARS_DIR / f'spark-{line.spark_line}'}: run make bootstrap")
        jars += connector

    standin_setup = {"tables": dict(tables or {}), "files_per_batch": 1, "observe_source_reads": observe_source_reads}
    if job.arguments.get("--datalake-formats") == "iceberg":
        # Glue adds its Iceberg libraries for `--datalake-formats iceberg` ("Using the Iceberg framework in AWS
        # Glue"): here the line's Iceberg runtime, and GlueCatalog/S3FileIO stood in over one local catalog that
        # every job of the rehearsal shares, as they share the Data Catalog (rehearsal/standin_iceberg/).
        # The stand-in first: Iceberg's Spark runtime carries the real GlueCatalog and S3FileIO classes (without the
        # AWS SDK they need), and the first jar holding a class is the one its loader uses.
        jars = [iceberg_standin_jar(line, build), *iceberg_jars(line), *jars]
        standin_setup["iceberg_catalog"] = str(iceberg_catalog_file(workdir))
    setup = workdir / f"standin-{job.logical_id}.json"
    setup.write_text(json.dumps(standin_setup, indent=1), encoding="utf-8")
    report = workdir / f"report-{job.logical_id}.jsonl"
    report.unlink(missing_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join([str(deployed), *map(str, zips), str(runtime)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYSPARK_PYTHON": str(line.python),
        # What Glue's launcher does on the JVM side: master, driver memory, the stand-in classes. S3's folders use the
        # local sessions' file system (rehearsal/runtime.py FORKLESS_LOCAL_FS_SOURCE): S3 sets no permission bits, and
        # Hadoop's own local one starts a `chmod` process for each file and directory it creates (kept when
        # glue_jobs.session.LOCAL_FS_VARIABLE says "hadoop", as in `make bench`).
        "PYSPARK_SUBMIT_ARGS": (
            f"--master local[{cores}] --driver-memory {driver_memory} --driver-class-path {jar} "
            + (f"--jars {','.join(map(str, jars))} " if jars else "")
            + (f"--conf spark.hadoop.fs.file.impl={FORKLESS_LOCAL_FS} " if forkless_local_fs() else "")
            + "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false pyspark-shell"
        ),
        "GLUE_STANDIN_SETUP": str(setup),
        "GLUE_STANDIN_REPORT": str(report),
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    for name in ("JAVA_HOME", "TZ"):
        if name in os.environ:
            env[name] = os.environ[name]
    if moto_endpoint:
        env["AWS_ENDPOINT_URL"] = moto_endpoint
    log_out, log_err = workdir / f"{job.logical_id}.out", workdir / f"{job.logical_id}.err"
    with open(log_out, "w") as out, open(log_err, "w") as err:
        process = subprocess.Popen([str(line.python), "-S", str(script), *argv], env=env, cwd=deployed, stdout=out,
                                   stderr=err, start_new_session=True)
    return StartedJob(job, argv, process, report, log_out, log_err, time.time())


def run_job(
    job: GlueJob,
    *,
    until: Callable[[], bool] | None = None,
    kill_when: Callable[[], bool] | None = None,
    timeout: float = 600,
    **start_options,
) -> JobRun:
    """Run the job's script as deployed. A batch job runs to its end; a streaming job runs until `until()`
    holds and is then stopped (SIGTERM to its process group), or is SIGKILLed when `kill_when()` holds.

    Neither condition is asked before the run has reported its Job.init: a condition already true when the run
    starts (its predecessor committed every record, or overshot the kill's batch count) stopped a run before it did
    anything, and the environment's checks then found "the streaming job never called Job.init" (a CI at cda6fd0)."""
    started = start_job(job, **start_options)
    stop_signal = None
    initialised = False
    try:
        while started.process.poll() is None:
            if time.time() - started.started > timeout:
                raise RehearsalError(f"{job.logical_id}: still running after {timeout:.0f} s; log {started.log_err}")
            initialised = initialised or any(e.get("event") == "job_init" for e in started.report())
            if not initialised:
                time.sleep(0.2)
                continue
            if kill_when is not None and kill_when():
                stop_signal = signal.SIGKILL
                break
            if until is not None and until():
                stop_signal = signal.SIGTERM
                break
            time.sleep(0.2)
    finally:
        run = started.finish(stop_signal=stop_signal)
    return run
