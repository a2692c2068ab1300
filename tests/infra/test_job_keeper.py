"""The job keeper in the synthesized templates (infra/job_keeper.py): for every streaming job of every environment a
deploy resource carrying the digest of what Glue runs, the not-running and restarts-capped alarms, and a function
whose permissions name those jobs only. Its decisions are tested against moto in tests/ops/test_job_keeper.py."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from devtools.template_sources import job_sources
from infra.config import load_config
from infra.job_keeper import DEPLOY_RESOURCE_TYPE, ENDED_STATES


def _of_type(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def _streaming_jobs(template: dict) -> dict[str, dict]:
    return {k: v for k, v in _of_type(template, "AWS::Glue::Job").items() if v["Properties"]["Command"]["Name"] == "gluestreaming"}


def _source_names(job: dict) -> list[str]:
    """The names of the sources a streaming job runs (its `--sources`, devtools/template_sources.py)."""
    return [source["source_name"] for source in job_sources(job["Properties"]["DefaultArguments"])]


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_every_streaming_job_has_a_deploy_resource_alarms_and_the_keepers_permissions(templates, environment):
    template = templates[environment]
    jobs = _streaming_jobs(template)
    assert len(jobs) == len(load_config().get(environment).job_groups) > 0
    deploys = {v["Properties"]["JobName"]["Ref"]: v["Properties"] for v in _of_type(template, DEPLOY_RESOURCE_TYPE).values()}
    assert set(deploys) == set(jobs)
    ((function_id, function),) = [(k, v) for k, v in _of_type(template, "AWS::Lambda::Function").items()
                                  if k.startswith("JobKeeperFunction")]
    for props in deploys.values():
        assert re.fullmatch(r"[0-9a-f]{64}", props["CodeDigest"]) and props["ServiceToken"] == {"Fn::GetAtt": [function_id, "Arn"]}
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    def watching(metric_name, job_id):
        return [a["Properties"] for a in alarms.values() if a["Properties"].get("MetricName") == metric_name
                and a["Properties"]["Dimensions"] == [{"Name": "JobName", "Value": {"Ref": job_id}}]]

    for job_id in jobs:
        (not_running,) = watching("JobNotRunning", job_id)
        assert not_running["TreatMissingData"] == "breaching" and not_running["Threshold"] == 1
        assert not_running["EvaluationPeriods"] * not_running["Period"] == 900  # 15 minutes without a run
        assert len(watching("RestartsCapped", job_id)) == 1
    # The keeper may touch the environment's streaming jobs and nothing else in Glue.
    role = {"Ref": function["Properties"]["Role"]["Fn::GetAtt"][0]}
    policies = [p for p in _of_type(template, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [role]]
    (statement,) = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "KeepStreamingJobsRunning"]
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    named = {part["Ref"] for r in resources for part in r["Fn::Join"][1] if isinstance(part, dict) and "Ref" in part
             and part["Ref"] in jobs}
    assert named == set(jobs) and len(resources) == len(jobs)
    # Stopping another job's run (a regrouping's old job): only on jobs tagged with the checkpoint bucket, or with
    # every one of the environment's tags (jobs deployed before the checkpoint-bucket tag carry those).
    stops = {s["Sid"]: s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]
             if s.get("Sid", "").startswith("StopCheckpointHolders")}
    assert sorted(stops) == ["StopCheckpointHolders", "StopCheckpointHoldersOfEnvironment"]
    assert all(sorted(s["Action"]) == ["glue:BatchStopJobRun", "glue:GetJobRuns"] for s in stops.values())
    assert stops["StopCheckpointHoldersOfEnvironment"]["Condition"] == {"StringEquals": {
        f"aws:ResourceTag/{key}": value for key, value in load_config().get(environment).tags.items()}}
    assert list(stops["StopCheckpointHolders"]["Condition"]["StringEquals"]) == ["aws:ResourceTag/streamlake:checkpoint-bucket"]
    (log_group,) = [v for k, v in _of_type(template, "AWS::Logs::LogGroup").items() if k.startswith("JobKeeper")]
    assert log_group["Properties"]["RetentionInDays"] == 90
    (rule,) = [v for k, v in _of_type(template, "AWS::Events::Rule").items() if k.startswith("JobKeeperJobEnded")]
    assert rule["Properties"]["EventPattern"]["detail"]["state"] == ENDED_STATES
    (schedule,) = [v for k, v in _of_type(template, "AWS::Events::Rule").items() if k.startswith("JobKeeperSchedule")]
    assert schedule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"


def _digests(template: dict) -> dict[str, str]:
    return {v["Properties"]["JobName"]["Ref"]: v["Properties"]["CodeDigest"] for v in _of_type(template, DEPLOY_RESOURCE_TYPE).values()}


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_the_digest_is_of_everything_a_run_fixes_in_the_template_it_gives_glue(templates, environment):
    """Recomputed from the synthesized template: every job property but NOT_RUN_FIXED (the script, every argument, those
    set as template overrides too, Glue version, workers, timeout, maintenance window, connections, security
    configuration, role), so changing any of them restarts the job; RunsWith carries the references CloudFormation
    resolves, and the digest formula is a property of its own."""
    import hashlib

    from infra.job_keeper import DIGEST_FORMULA, NOT_RUN_FIXED, RUNS_WITH

    template = templates[environment]
    jobs = _streaming_jobs(template)
    deploys = {v["Properties"]["JobName"]["Ref"]: v["Properties"] for v in _of_type(template, DEPLOY_RESOURCE_TYPE).values()}
    for job_id, digest in _digests(template).items():
        props = jobs[job_id]["Properties"]
        assert "--spark-event-logs-path" in props["DefaultArguments"] and props.get("Timeout") == 10080
        what = {k: v for k, v in props.items() if k not in NOT_RUN_FIXED}
        assert {"Command", "DefaultArguments", "GlueVersion", "WorkerType", "NumberOfWorkers", "Timeout", "Role",
                "SecurityConfiguration"} <= set(what)
        assert hashlib.sha256(json.dumps(what, sort_keys=True, separators=(",", ":")).encode()).hexdigest() == digest
        assert deploys[job_id].get("RunsWith") == {k: props[k] for k in RUNS_WITH if k in props}
        assert deploys[job_id].get("DigestFormula") == DIGEST_FORMULA and int(deploys[job_id].get("ServiceTimeout", 3600)) <= 900


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_the_deploy_resources_and_the_schedule_wait_for_the_roles_policies_log_groups_and_grants(templates, environment):
    """CloudFormation creates independent resources in parallel: each deploy resource (which starts its job) waits for its
    job's role policies, its log groups and, with Lake Formation on, the grants; the schedule waits for every deploy."""
    template = templates[environment]
    resources = template["Resources"]
    deploys = _of_type(template, DEPLOY_RESOURCE_TYPE)
    jobs = _streaming_jobs(template)
    for deploy_id, deploy in deploys.items():
        job = jobs[deploy["Properties"]["JobName"]["Ref"]]
        role = job["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = [k for k, v in _of_type(template, "AWS::IAM::Policy").items() if {"Ref": role} in v["Properties"]["Roles"]]
        policies += [k for k, v in _of_type(template, "AWS::IAM::ManagedPolicy").items() if {"Ref": role} in v["Properties"].get("Roles", [])]
        groups = [k for k, v in _of_type(template, "AWS::Logs::LogGroup").items() if role in json.dumps(v["Properties"].get("LogGroupName"))]
        assert policies and len(groups) >= 2, deploy_id
        assert set(policies) | set(groups) <= set(deploy.get("DependsOn", [])), deploy_id
        grants = [k for k, v in resources.items() if v["Type"].startswith("AWS::LakeFormation::")]
        assert set(grants) <= set(deploy["DependsOn"]), deploy_id
    (schedule_id,) = [k for k, v in _of_type(template, "AWS::Events::Rule").items() if k.startswith("JobKeeperSchedule")]
    assert set(deploys) <= set(resources[schedule_id].get("DependsOn", []))


def test_the_keeper_has_no_reserved_concurrency(templates):
    for template in templates.values():
        for function in _of_type(template, "AWS::Lambda::Function").values():
            assert "ReservedConcurrentExecutions" not in function["Properties"]


def test_a_changed_job_script_changes_the_digest_of_every_job_running_it_and_an_unchanged_synth_none(templates, monkeypatch, tmp_path):
    """What makes CloudFormation send the keeper an Update (and the keeper restart a running job): the digest.
    Only AWS can show the rest: that CloudFormation then invokes the function (custom resource Update semantics)."""
    from devtools.snapshot import synth_templates
    from infra import job_assets

    before = _digests(templates["dev"])
    assert _digests(synth_templates(["dev"])["dev"]) == before  # the same tree: the same digests, nothing restarts
    real = job_assets.entrypoint

    def changed(package: str, module: str = "glue_entry"):
        path = real(package, module)
        if package != "glue_jobs":
            return path
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        with copy.open("a", encoding="utf-8") as out:
            out.write("\n# a changed line\n")
        return copy

    monkeypatch.setattr(job_assets, "entrypoint", changed)
    after = _digests(synth_templates(["dev"])["dev"])
    assert set(after) == set(before) and all(after[job] != before[job] for job in before)


def test_a_config_change_of_one_job_changes_only_that_jobs_digest(templates):
    import dataclasses

    from devtools.snapshot import synth_templates

    config = load_config()
    staging = config.get("staging")
    kafka_jobs = staging.msk.source_names
    changed = dataclasses.replace(staging, msk=dataclasses.replace(staging.msk, min_partitions=None))
    after = _digests(synth_templates(["staging"], config=dataclasses.replace(
        config, environments={**config.environments, "staging": changed}))["staging"])
    before = _digests(templates["staging"])
    moved = {job for job in before if before[job] != after[job]}
    jobs = _streaming_jobs(templates["staging"])
    assert moved and all(set(_source_names(jobs[job])) <= set(kafka_jobs) for job in moved)
    assert len(moved) == len(kafka_jobs) < len(before)


def _text(value) -> str:
    """A template string value as text, nested Fn::Joins flattened (CDK merges joins of one delimiter), other
    intrinsics as their JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        delimiter, parts = value["Fn::Join"]
        return delimiter.join(_text(part) for part in parts)
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_every_glue_job_logs_to_log_groups_of_the_stack_under_the_names_glue_writes(templates, environment):
    """Glue with a security configuration that encrypts logs writes to names of its own (infra/glue_security.py
    job_logging): on 4.0 `<--continuous-log-logGroup>-<configuration>` and `/aws-glue/jobs/<configuration>-role/<role
    name>/output|error`; on 5.x `<--custom-logGroup-prefix>/<configuration>-role/<role name>/output|error`. The stack
    creates exactly those, kept 90 days, encrypted with the logs key (deleted after them)."""
    template = templates[environment]
    resources = template["Resources"]
    (configuration,) = [v["Properties"]["Name"] for v in _of_type(template, "AWS::Glue::SecurityConfiguration").values()]
    names = {_text(v["Properties"].get("LogGroupName")): k for k, v in _of_type(template, "AWS::Logs::LogGroup").items()}
    jobs = _of_type(template, "AWS::Glue::Job")
    assert len(jobs) == len(load_config().get(environment).job_groups) + 1  # the streaming jobs and compaction
    for job in jobs.values():
        props, arguments = job["Properties"], job["Properties"]["DefaultArguments"]
        assert isinstance(arguments.get("--continuous-log-logGroup", arguments.get("--custom-logGroup-prefix")), (str, dict)), job
        assert props["SecurityConfiguration"] == {"Ref": next(iter(_of_type(template, "AWS::Glue::SecurityConfiguration")))}
        role = {"Ref": props["Role"]["Fn::GetAtt"][0]}
        if float(props["GlueVersion"]) < 5:
            base = arguments["--continuous-log-logGroup"]
            expected = [{"Fn::Join": ["-", [base, configuration]]} if isinstance(base, dict) else f"{base}-{configuration}",
                        *({"Fn::Join": ["", [f"/aws-glue/jobs/{configuration}-role/", role, f"/{kind}"]]} for kind in ("output", "error"))]
        else:
            assert "--continuous-log-logGroup" not in arguments and "--enable-continuous-cloudwatch-log" not in arguments
            base = arguments["--custom-logGroup-prefix"]
            expected = [{"Fn::Join": ["", [base, f"/{configuration}-role/", role, f"/{kind}"]]} if isinstance(base, dict)
                        else {"Fn::Join": ["", [f"{base}/{configuration}-role/", role, f"/{kind}"]]} for kind in ("output", "error")]
        for name in expected:
            group_id = names.get(_text(name))
            assert group_id is not None, (environment, name)
            group = resources[group_id]
            assert group["Properties"]["RetentionInDays"] == 90
            key_id = group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
            assert resources[key_id]["Type"] == "AWS::KMS::Key" and key_id.startswith("GlueSecurityLogsKey")
            assert resources[key_id]["DeletionPolicy"] == group["DeletionPolicy"]


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_every_glue_job_writes_spark_ui_event_logs_under_its_own_prefix_of_the_assets_bucket(templates, environment):
    template = templates[environment]
    (assets,) = [k for k, v in _of_type(template, "AWS::S3::Bucket").items() if k.startswith("StorageJobAssetsBucket")]
    for job in _of_type(template, "AWS::Glue::Job").values():
        arguments = job["Properties"]["DefaultArguments"]
        streaming = job["Properties"]["Command"]["Name"] == "gluestreaming"
        # a job's name in the config: a shared job's own (dev's "ingest"), a source's own job the source's
        name = load_config().get(environment).job_of(_source_names(job)[0]).name if streaming else "compaction"
        assert arguments["--enable-spark-ui"] == "true"
        assert arguments["--spark-event-logs-path"] == {"Fn::Join": ["", ["s3://", {"Ref": assets}, f"/spark-ui/{name}/"]]}
        role = job["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = [s for p in _of_type(template, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role}]
                      for s in p["Properties"]["PolicyDocument"]["Statement"]]
        on_assets = [r for s in statements for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
                     if assets in json.dumps(r)]
        assert on_assets and all(f"/spark-ui/{name}" in json.dumps(r) or r == {"Fn::GetAtt": [assets, "Arn"]} for r in on_assets)


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_an_outage_past_half_the_sources_retention_alarms_for_every_job(templates, environment):
    """The keeper's DownSeconds against half of each source's retention (Kinesis stream, MSK topic), also given to
    the function in JOBS."""
    config = load_config().get(environment)
    template = templates[environment]
    retention = {s.name: s.retention_hours for s in config.kinesis_streams} | {
        source: config.msk.topic_retention_hours for source in config.msk.source_names}
    jobs = _streaming_jobs(template)
    alarms = [a["Properties"] for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
              if a["Properties"].get("MetricName") == "DownSeconds"]
    assert len(alarms) == len(jobs) == len(config.job_groups)
    by_job = {a["Dimensions"][0]["Value"]["Ref"]: a for a in alarms}
    (function,) = [v for k, v in _of_type(template, "AWS::Lambda::Function").items() if k.startswith("JobKeeperFunction")]
    entries = json.loads(json.dumps(function["Properties"]["Environment"]["Variables"]["JOBS"]))
    for job_id, job in jobs.items():
        shortest = min(retention[source] for source in _source_names(job))  # a shared job: its shortest-kept source's
        assert by_job[job_id]["Threshold"] == shortest * 3600 // 2
        assert f'"retention_hours\\": {shortest}' in json.dumps(entries) or f'"retention_hours": {shortest}' in json.dumps(entries)
