"""The deploy rehearsal: the jobs as CloudFormation deploys them (script and zip assets, DefaultArguments
of the synthesized template) run through AWS's awsglue library against the Glue stand-in."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from rehearsal import assembly as assembly_module
from rehearsal.assembly import RehearsalError
from rehearsal.checks import problems
from rehearsal.run import LocalS3, check_arguments, run_job
from rehearsal.runtime import runtime_folder
from rehearsal.scenario import HeldInput, kinesis_input, rehearse_environment, routed, source_table

RECORDS = 600  # per streaming source, in 3 files: 3 micro-batches


def _rehearse(cloud_assembly, env, spark_lines, moto_endpoint, spark, tmp_path, **options):
    assembly = assembly_module.load(cloud_assembly, env)
    result = rehearse_environment(assembly, lines=spark_lines, workdir=tmp_path, moto_endpoint=moto_endpoint,
                                  records=RECORDS, **options)
    return assembly, result, problems(result, spark, LocalS3(tmp_path / "s3"))


def test_the_package_zip_imports_with_nothing_but_the_zip_and_the_glue_runtime(cloud_assembly, spark_lines, tmp_path):
    """Glue imports the --extra-py-files zip in place: every module and the packaged schemas must load from it
    (clickstream's from the zip's datasets/clickstream/, its one home). (Before the schema became package data this
    failed with NotADirectoryError: .../zip/glue_jobs/event.avsc.)"""
    assembly = assembly_module.load(cloud_assembly, "dev")
    (package,) = {zip_path for job in assembly.glue_jobs() for zip_path in job.extra_py_files}
    modules = sorted(name[:-3].replace("/", ".").removesuffix(".__init__")
                     for name in zipfile.ZipFile(package).namelist() if name.endswith(".py"))
    assert "glue_jobs.batch" in modules and "compaction.job" in modules
    assert not [m for m in modules if m.split(".")[-1] in ("__main__", "local_runner", "local_kafka", "generate", "glue_entry")]
    names = zipfile.ZipFile(package).namelist()
    assert "datasets/clickstream/schema.v1.avsc" in names and not [n for n in names if n.startswith("glue_jobs/schemas/")]
    for line in spark_lines.values():
        runtime = runtime_folder(line, tmp_path / "build")
        code = ("import importlib, sys\n"
                f"for name in {modules!r}: importlib.import_module(name)\n"
                "from glue_jobs import schema\n"
                "assert schema.contract_fields()[0].name == 'event_id', schema.contract_fields()\n"
                "from glue_jobs import datasets\n"
                "assert sorted(datasets.load_all()) == ['checkouts', 'clickstream', 'orders', 'page_views'], datasets.names()\n"
                "assert all('.zip' in m.__file__ for n, m in sys.modules.items() if n.startswith(('glue_jobs', 'compaction')))\n"
                "print('imported', len(" + repr(modules) + "))\n")
        done = subprocess.run([str(line.python), "-S", "-c", code], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={"PYTHONPATH": f"{package}:{runtime}", "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == f"imported {len(modules)}"


def test_an_argument_neither_glue_nor_the_script_knows_fails_the_rehearsal(cloud_assembly):
    assembly = assembly_module.load(cloud_assembly, "dev")
    for job in assembly.glue_jobs():
        check_arguments(job, job.arguments)  # what deploys passes
        with pytest.raises(RehearsalError, match=r"\['--window_sise_seconds'\]"):
            check_arguments(job, {**job.arguments, "--window_sise_seconds": "1"})


@pytest.mark.e2e
def test_dev_rehearses_clean_and_reads_the_source_once_per_batch(cloud_assembly, spark_lines, moto_endpoint, spark,
                                                                 tmp_path):
    assembly, result, found = _rehearse(cloud_assembly, "dev", spark_lines, moto_endpoint, spark, tmp_path,
                                        observe_source_reads=True)
    assert found == []
    # Two datasets of their own streams (flat JSON, nested JSON) and dev's routed stream, carrying two by `kind`.
    assert sorted(result.sources) == ["clickstream", "events", "orders"]
    assert result.compaction is not None and result.alarm_metrics and result.alarm_metrics <= result.metrics
    # The deployed compaction ranks duplicates in sorted runs: its --extra-jars carry the functions jar.
    assert "duplicates ranked in sorted runs with com.streamlake.glue.RankInRuns" in result.compaction.stderr
    # The job keeper's deployed code, one scheduled check against moto's Glue: it started dev's one streaming job,
    # "ingest" (never run), which runs the three sources.
    assert list(result.keeper.values()) == ["running"]
    (job,) = [j for j in assembly.glue_jobs() if j.command == "gluestreaming"]
    assert [s.name for s in job.sources] == ["clickstream", "orders", "events"]
    assert job.sources[2].arguments["--datasets"] == "checkouts,page_views"
    # The routed source as deployed: each dataset's part and the unroutable one committed and checked (problems())
    from rehearsal.checks import parts_of

    parts = {part.label for part in parts_of(result.sources["events"], LocalS3(tmp_path / "s3"))}
    assert parts == {"events/checkouts", "events/page_views", "events/unroutable"}
    for source in result.sources.values():
        assert source.committed["records_in"] == RECORDS and source.committed["batches"] == 3
        # persistDataFrame "false": each batch reads its records from the source once, plus the one record
        # forEachBatch's take(1) looks at (with the default, awsglue persists and counts the raw batch first).
        (run,) = source.runs
        reads = run.events("source_reads")
        assert len(reads) >= 2
        for batch in reads:
            assert RECORDS // 3 <= batch["rows_read"] <= RECORDS // 3 + 1, reads
        options = run.events("source")[0]["options"]
        assert "inferSchema=true" in options and "addRecordTimestamp=true" in options


# What staging's jobs may differ from prod's in: its name, Catalog database, registry and the Kinesis source's
# min_partitions (from the shard count; registry_name and min_partitions are keys of a source in --sources). The
# regrouping rehearsal runs staging's artifacts only (a second environment's run took another ~2.5 minutes of CI);
# the test below keeps that standing for prod.
# The log group arguments name the environment's groups (infra/glue_security.py job_logging).
STAGING_ONLY = {"--environment", "--catalog_database", "--registry_name", "--min_partitions", "--continuous-log-logGroup",
                "--custom-logGroup-prefix"}


def test_staging_deploys_the_jobs_prod_rehearses(cloud_assembly):
    """Staging's jobs are prod's: the same commands, Glue versions, script, zip and jar (byte for byte) and the same
    DefaultArguments but for STAGING_ONLY. A config change that makes them differ fails here, and then staging
    needs its own sigkill rehearsal again."""
    def jobs(env):
        assembly = assembly_module.load(cloud_assembly, env)
        return {(j.command, tuple(s.arguments["--dataset"] for s in j.sources)): (
            j.glue_version, j.script.read_bytes(), [p.read_bytes() for p in j.extra_py_files],
            [p.read_bytes() for p in j.extra_jars],
            {k: v for k, v in j.arguments.items() if k not in STAGING_ONLY and k != "--sources"},
            [{k: v for k, v in s.arguments.items() if k not in STAGING_ONLY} for s in j.sources],  # each source's keys
        ) for j in assembly.glue_jobs()}

    staging, prod = jobs("staging"), jobs("prod")
    assert set(staging) == set(prod) and len(prod) == 3
    for key, job in prod.items():
        assert staging[key] == job, key


@pytest.mark.e2e
@pytest.mark.broker
def test_moving_a_kinesis_and_a_kafka_source_into_one_job_continues_each_from_its_checkpoint(
        cloud_assembly, spark_lines, moto_endpoint, spark, tmp_path):
    """A regrouping deploy, as CloudFormation makes it: staging's two jobs (clickstream on Kinesis, orders on Kafka, a
    real broker on loopback) run and commit a batch each; the config then puts both sources in one job. The deployed
    keeper, given the new job's Create, stops the old jobs' runs before it starts the new one. The new job, as
    deployed (its script, zip and `--sources`; both queries in one process through AWS's forEachBatch, the Kafka
    one's and the Kinesis one's), continues each source from its checkpoint, and is SIGKILLed (with its JVM) at three
    moments (once the two sources have committed 3, 4 and 5 batches between them, and one more than when the run
    started) and run again each time: each dataset holds every valid record once (after the hourly compaction), each
    source's dead letters are its own bad records, once; then every check of rehearse_environment holds (compaction, the keeper, each alarmed metric
    published). Staging's jobs are prod's (test_staging_deploys_the_jobs_prod_rehearses), so this rehearses prod's
    single-source jobs as deployed too."""
    import boto3

    from devtools.kafka_broker import KafkaBroker
    from infra.config import DEFAULT_CONFIG_PATH, update_raw
    from rehearsal.keeper import rehearse_keeper, rehearse_keeper_deploy
    from rehearsal.scenario import (
        EnvironmentResult,
        SourceResult,
        alarm_metrics,
        committed_stats,
        hold_source,
        received_metrics,
        run_arguments_for,
    )
    from tests.rehearsal.conftest import synthesize

    raw = json.loads(Path(DEFAULT_CONFIG_PATH).read_text(encoding="utf-8"))
    raw = update_raw(raw, "staging", "streaming_jobs", [{"name": "ingest", "sources": ["clickstream", "orders"]}])
    raw["environments"] = {"staging": raw["environments"]["staging"]}
    before = assembly_module.load(cloud_assembly, "staging")
    after = assembly_module.load(synthesize(tmp_path / "cdk.out", raw), "staging")
    old_jobs = [j for j in before.glue_jobs() if j.command == "gluestreaming"]
    (shared,) = [j for j in after.glue_jobs() if j.command == "gluestreaming"]
    assert [(s.name, s.arguments["--source_type"]) for s in shared.sources] == [("clickstream", "kinesis"), ("orders", "kafka")]
    assert len(old_jobs) == 2 and shared.arguments["--sources"] != old_jobs[0].arguments["--sources"]
    s3, line, files = LocalS3(tmp_path / "s3"), spark_lines[shared.glue_version], 3
    sources = {s.name: s for s in shared.sources}
    with KafkaBroker(tmp_path / "kafka") as broker:
        tables, results = {}, {}
        for seed, job in enumerate(old_jobs, start=31):
            (source,) = job.sources
            held, source_tables = hold_source(before, source, workdir=tmp_path, records=RECORDS, files=files, seed=seed,
                                              moto_endpoint=moto_endpoint, broker=broker)
            tables |= source_tables
            results[source.name] = SourceResult(source.name, held, sources[source.name].arguments)
        held = {name: result.held for name, result in results.items()}

        def published(job, *names: str) -> bool:
            """Whether each named source's RecordsIn reached CloudWatch. A run is stopped or killed once the sources that
            committed a batch have published one: a process's first PutMetricData comes after its first commit marker
            (its boto3 client is made on first use), seconds later on a loaded machine, and once every run ended
            before it, so clickstream's alarmed metrics never arrived (the check below found none)."""
            got = received_metrics(moto_endpoint, job.arguments["--metrics_namespace"])
            return all(("RecordsIn", frozenset({("Environment", "staging"), ("Source", name)})) in got for name in names)

        for job in old_jobs:  # each old job commits a batch, then the keeper's stop ends its run
            (source,) = job.sources
            run = run_job(job, until=lambda job=job, source=source: committed_stats(s3, source)["batches"] >= 1
                          and published(job, source.name), line=line,
                          workdir=tmp_path, s3=s3, tables=tables, moto_endpoint=moto_endpoint,
                          run_arguments=run_arguments_for(job, held, files=files, broker=broker))
            assert run.stopped, run.stderr[-3000:]
        deployed = rehearse_keeper_deploy(before, after, moto_endpoint)
        new = after.ref(shared.logical_id)
        assert deployed[new]["status"] == "SUCCESS" and list(deployed[new]["runs"].values()) == ["STARTING"], deployed
        glue = boto3.client("glue", endpoint_url=moto_endpoint, region_name="eu-west-1", aws_access_key_id="rehearsal",
                            aws_secret_access_key="rehearsal")
        for job in old_jobs:  # stopped before the new job was started
            assert [r["JobRunState"] for r in glue.get_job_runs(JobName=before.ref(job.logical_id))["JobRuns"]] == ["STOPPED"]

        def batches() -> int:
            return sum(committed_stats(s3, source)["batches"] for source in sources.values())

        common = dict(line=line, workdir=tmp_path, s3=s3, tables=tables, moto_endpoint=moto_endpoint,
                      run_arguments=run_arguments_for(shared, held, files=files, broker=broker))
        runs = []
        for moment in (3, 4, 5):
            # at least one batch past where this run starts: a run the last one overshot (both sources commit in
            # quick succession) still gets past Job.init and commits before its kill
            target = max(moment, batches() + 1)
            runs.append(run_job(shared, kill_when=lambda target=target: batches() >= target and published(
                shared, *(n for n in sources if committed_stats(s3, sources[n])["batches"])), **common))
            assert runs[-1].stopped and runs[-1].returncode == -9, runs[-1].stderr[-3000:]
        runs.append(run_job(shared, until=lambda: all(committed_stats(s3, sources[n])["records_in"] >= held[n].records
                                                      for n in sources), **common))
        assert runs[-1].stopped, runs[-1].stderr[-3000:]
    for name, result in results.items():
        result.runs, result.committed = runs, committed_stats(s3, sources[name])
    # The environment's other checks, as rehearse_environment makes them: the hourly compaction as deployed (it
    # collapses the copies a source sent in two micro-batches), the keeper's scheduled check, the metrics every alarm
    # watches (the Kafka source's ArrivalLagMs among them) published by the jobs.
    (compaction,) = [j for j in after.glue_jobs() if j.command == "glueetl"]
    environment = EnvironmentResult("staging", sources=results, compaction=run_job(
        compaction, line=spark_lines[compaction.glue_version], workdir=tmp_path, s3=s3, moto_endpoint=moto_endpoint))
    assert environment.compaction.returncode == 0, environment.compaction.stderr[-3000:]
    environment.keeper = rehearse_keeper(after, moto_endpoint)
    namespace = shared.arguments["--metrics_namespace"]
    environment.metrics, environment.alarm_metrics = received_metrics(moto_endpoint, namespace), alarm_metrics(after, namespace)
    assert problems(environment, spark, s3) == []
    assert all(result.committed["batches"] >= 2 for result in results.values())  # each continued where it stopped


@pytest.mark.e2e
def test_each_job_kind_rehearses_on_the_other_allowed_glue_version(swapped_lines_assembly, spark_lines, moto_endpoint,
                                                                   spark, tmp_path, monkeypatch):
    """dev's shared job on Glue 5.0 with five datasets: clickstream (Parquet), orders (Iceberg, by its dataset.json)
    and dev's routed stream carrying page_views and checkouts, joined by sensor_readings, which a team added with its
    files and one route value; and a routed MSK topic (a real broker) carrying checkouts and page_views by registry
    schema: one Glue job, sized by its own block, each table holding exactly its records, each dataset's dead
    letters its own and the records no route takes the routed source's (the checks of problems())."""
    from glue_jobs import datasets
    from rehearsal.checks import parts_of, source_problems

    cloud_assembly, team_datasets = swapped_lines_assembly
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(team_datasets))  # the held input and the checks; the job: its zip
    assembly = assembly_module.load(cloud_assembly, "dev")
    assert {j.command: j.glue_version for j in assembly.glue_jobs()} == {"gluestreaming": "5.0", "glueetl": "4.0"}
    (shared,) = [j for j in assembly.glue_jobs() if j.command == "gluestreaming"]
    assert [(s.name, s.arguments.get("--dataset"), s.arguments.get("--datasets")) for s in shared.sources] == [
        ("clickstream", "clickstream", None), ("orders", "orders", None),
        ("events", None, "checkouts,page_views,sensor_readings"), ("mix", None, "checkouts,page_views")]
    assert shared.arguments["--window_size_seconds"] == "60"  # its own block (dev.streaming_jobs[0].streaming)
    result = rehearse_environment(assembly, lines=spark_lines, workdir=tmp_path, moto_endpoint=moto_endpoint,
                                  records=RECORDS)
    s3 = LocalS3(tmp_path / "s3")
    assert problems(result, spark, s3) == []
    # The routed source as deployed: each part's records as the mix held them, counted by its own commit markers, the
    # unroutable ones the source's own dead letters. (Not killed here: the deployed job's replay is the moving test's
    # below, the routed writer's tests/spark/test_routed_batch.py's; a kill here cost about three minutes of CI.)
    events = result.sources["events"]
    assert events.committed["records_in"] == RECORDS and events.committed["batches"] == 3
    parts = {part.label: part for part in parts_of(events, s3)}
    assert sorted(parts) == ["events/checkouts", "events/page_views", "events/sensor_readings", "events/unroutable"]
    for part in parts.values():
        assert part.held.records and part.committed["records_in"] == part.held.records, part.label
        assert part.committed["dead_letters"] == len(part.held.bad_payloads), part.label
    assert sum(part.committed["records_in"] for part in parts.values()) == RECORDS
    # The routed MSK topic as deployed (`--sources` routes {registry schema: dataset}, the KafkaRouter the entrypoint
    # builds from it): checkouts' and page_views' frames, each framed with its own registry schema, in their datasets; frames of a schema no dataset is bound to and values that are no frame, the source's own dead letters.
    mix = result.sources["mix"]
    routes = json.loads(mix.arguments["--routes"])
    assert sorted(routes.values()) == ["checkouts", "page_views"] and mix.arguments["--route_field"] == "schema"
    assert mix.committed["records_in"] == RECORDS
    parts = {part.label: part for part in parts_of(mix, s3)}
    assert sorted(parts) == ["mix/checkouts", "mix/page_views", "mix/unroutable"]
    for part in parts.values():
        assert part.held.records and part.committed["records_in"] == part.held.records, part.label
        assert part.committed["dead_letters"] == len(part.held.bad_payloads), part.label
    from glue_jobs.schema import spark_dead_letter_schema

    unrouted = spark.read.schema(spark_dead_letter_schema()).parquet(s3.path(parts["mix/unroutable"].dead_letter_path))
    reasons = {r.reason: r[1] for r in unrouted.groupBy("reason").count().collect()}
    # 1 in 50 of an unbound schema and the frame of an id the registry lacks; three values that are no frame
    assert reasons == {"unroutable": RECORDS // 50 + 1, "malformed_record": 3}, reasons
    # The checks notice a record in the wrong dataset: with two datasets' shares swapped they fail, naming both.
    held = events.held.parts
    held["page_views"], held["checkouts"] = held["checkouts"], held["page_views"]
    swapped = source_problems({"events": events}, spark, s3)
    assert any(p.startswith("events/page_views: lake holds") for p in swapped), swapped
    assert any(p.startswith("events/checkouts: lake holds") for p in swapped), swapped
    # orders is Iceberg here: its job committed through the catalog the deployed settings name (stood in), and the
    # checks above read its rows with pyiceberg: every valid order once, every batch tag on one snapshot
    orders = result.sources["orders"].runs[0]
    assert orders.job.arguments["--datalake-formats"] == "iceberg"
    (catalog,) = {(e["name"], e["io_impl"]) for e in orders.events("iceberg_catalog")}
    assert catalog == ("glue_catalog", "org.apache.iceberg.aws.s3.S3FileIO")
    # No Data Catalog table version archived per commit, on Glue 4.0's Iceberg 1.0.0 (the compaction here) as on 5.0
    # (glue_jobs/session.glue_iceberg_settings): the catalog the deployed settings make was given glue.skip-archive.
    compaction_catalogs = [e for e in result.compaction.report if e["event"] == "iceberg_catalog"]
    assert compaction_catalogs and {e["skip_archive"] for e in compaction_catalogs} == {"true"}
    assert {e["skip_archive"] for e in orders.events("iceberg_catalog")} == {"true"}
    from rehearsal.checks import iceberg_rows

    rows, tags = iceberg_rows(result.iceberg_catalog, ("streamlake_dev", "orders"), ("order_id",))
    assert len(rows) == len(result.sources["orders"].held.valid_event_ids) and len(tags) == 3
    # clickstream, Parquet, runs in the same job (dev's "ingest"), which carries Glue's Iceberg jars for orders
    assert "--lake_table" not in result.sources["clickstream"].arguments
    assert result.sources["clickstream"].runs[0].job is orders.job
    assert "orders: Iceberg maintenance failed" not in result.compaction.stderr
    assert "duplicates ranked in sorted runs with com.streamlake.glue.RankInRuns" in result.compaction.stderr  # Glue 4.0


@pytest.mark.e2e
def test_a_source_option_glue_does_not_document_fails_the_job(cloud_assembly, spark_lines, tmp_path):
    assembly = assembly_module.load(cloud_assembly, "dev")
    (job,) = [j for j in assembly.glue_jobs() if "clickstream" in [s.name for s in j.sources]]
    tables = {}
    for source in job.sources:  # dev's job runs clickstream, orders and events: the stand-in has a table for each
        folder = tmp_path / "held" / source.name
        if routed(source):  # events: its table only (the run fails on clickstream's before any batch)
            folder.mkdir(parents=True)
            held = HeldInput(folder, 0, [], [], 0)
        else:
            held = kinesis_input(folder, records=30, files=1, seed=1, dataset=source.arguments["--dataset"])
        tables |= source_table(assembly, source, held)
    (table,) = [t for name, t in tables.items() if name.endswith(".source_clickstream")]
    table["parameters"]["maxFetchRecordPerShard"] = "10"  # a typo of maxFetchRecordsPerShard
    run = run_job(job, line=spark_lines[job.glue_version], workdir=tmp_path,
                  s3=LocalS3(tmp_path / "s3"), tables=tables, timeout=300)
    assert run.returncode not in (0, None) and not run.stopped
    assert "option maxFetchRecordPerShard is not a documented Kinesis connection option" in run.stderr


def test_assembly_resolves_the_expressions_the_templates_use(cloud_assembly):
    assembly = assembly_module.load(cloud_assembly, "staging")
    for job in assembly.glue_jobs():
        assert job.script.exists() and job.script.suffix == ".py"
        assert [p.suffix for p in job.extra_py_files] == [".zip"]
        lake_paths = ([s.arguments["--lake_path"] for s in job.sources] if job.command == "gluestreaming" else
                      list(json.loads(job.arguments["--lake_tables"]).values()))  # compaction: every dataset's table
        assert lake_paths and all(p.startswith("s3://rehearsal-storagelakebucket") for p in lake_paths)
    with pytest.raises(RehearsalError, match="does not resolve Fn::ImportValue"):
        assembly.resolve({"Fn::ImportValue": "x"})
    with pytest.raises(RehearsalError, match="does not declare"):
        assembly.resolve({"Ref": "NoSuchResource"})
    assert Path(assembly.directory).name == "assembly-staging"


def test_a_glue_6_job_is_refused_with_the_reason_it_cannot_be_rehearsed(tmp_path):
    """AWS's awsglue package for Glue 6.0 needs Python 3.13; only 3.11 installs here (infra/runtimes.py)."""
    from rehearsal.__main__ import SPARK_LINE_PYTHONS
    from rehearsal.assembly import GlueJob, RehearsalError
    from rehearsal.scenario import _line

    assert sorted(SPARK_LINE_PYTHONS) == ["4.0", "5.0", "5.1"]
    job = GlueJob("Compaction", "glueetl", "6.0", tmp_path / "glue_entry.py", (), (), {})
    with pytest.raises(RehearsalError, match=r"Compaction runs on Glue 6.0: AWS's awsglue package for Glue 6.0 needs "
                                             r"Python 3.13, which this machine cannot install"):
        _line({"4.0": object(), "5.0": object(), "5.1": object()}, job)


def test_a_worker_type_change_in_prod_restarts_each_streaming_job_through_the_deployed_keeper(cloud_assembly, moto_endpoint,
                                                                                              tmp_path):
    """prod synthesized again with another `streaming.worker_type` (a JobRun keeps the worker type it started with):
    each deploy resource changes, and the keeper's deployed code, given CloudFormation's Update, stops the running run
    and starts the job once; its answer to CloudFormation is SUCCESS."""
    from infra.config import DEFAULT_CONFIG_PATH, update_raw
    from rehearsal.keeper import rehearse_keeper_deploy
    from tests.rehearsal.conftest import synthesize

    raw = json.loads(Path(DEFAULT_CONFIG_PATH).read_text(encoding="utf-8"))
    raw = update_raw(raw, "prod", "streaming.worker_type", "G.2X")
    raw["environments"] = {"prod": raw["environments"]["prod"]}
    changed = synthesize(tmp_path / "cdk.out", raw)
    before, after = assembly_module.load(cloud_assembly, "prod"), assembly_module.load(changed, "prod")
    results = rehearse_keeper_deploy(before, after, moto_endpoint)
    streaming = [j for j in before.glue_jobs() if j.command == "gluestreaming"]
    assert len(results) == len(streaming) == 2
    for result in results.values():
        assert "started run" in result["reason"] and result["status"] == "SUCCESS", result
        assert sorted(result["runs"].values()) == ["STARTING", "STOPPED"], result
