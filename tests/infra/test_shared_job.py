"""A streaming job declared in `streaming_jobs` runs its sources in one Glue job: one job in the template, sized by
its own block, a role that reads exactly its sources and writes exactly their datasets, one keeper deploy, one set of
job alarms, and per-source alarms on the job's per-source metrics. SHARED groups dev's clickstream and orders; dev's
routed stream `events`, which it leaves out, runs in a job of its own beside it."""

from __future__ import annotations

import json
import re

import pytest

from devtools.template_sources import job_sources
from infra.config import DEFAULT_CONFIG_PATH, parse_config, update_raw

SHARED = [{"name": "ingest", "sources": ["clickstream", "orders"], "streaming": {"max_workers": 3, "window_size_seconds": 30}}]


@pytest.fixture(scope="module")
def shared_dev() -> dict:
    from devtools.snapshot import synth_templates

    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    config = parse_config(update_raw(raw, "dev", "streaming_jobs", SHARED))
    return synth_templates(["dev"], config=config)["dev"]  # cdk-nag enforced


def _of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _text(value) -> str:
    return json.dumps(value, sort_keys=True)


def _construct(logical_id: str) -> str:
    """The logical id without the hash CDK appends."""
    return re.sub(r"[0-9A-F]{8}$", "", logical_id)


def _streaming_jobs(template: dict) -> dict[str, dict]:
    return {k: v for k, v in _of_type(template, "AWS::Glue::Job").items() if v["Properties"]["Command"]["Name"] == "gluestreaming"}


def test_one_glue_job_runs_both_sources_sized_by_its_own_block(shared_dev, templates):
    streaming = _streaming_jobs(shared_dev)
    (job_id,) = [k for k in streaming if k.startswith("StreamingJobIngest")]
    # the one other streaming job is events', the source SHARED leaves out, which runs alone
    assert sorted(_construct(k) for k in streaming) == ["StreamingJobEventsJob", "StreamingJobIngestJob"]
    (other,) = [v for k, v in streaming.items() if k != job_id]
    assert [s["source_name"] for s in job_sources(other["Properties"]["DefaultArguments"])] == ["events"]
    properties = streaming[job_id]["Properties"]
    assert (properties["NumberOfWorkers"], properties["DefaultArguments"]["--window_size_seconds"]) == (3, "30")
    sources = job_sources(properties["DefaultArguments"])
    assert [(s["source_name"], s["dataset"]) for s in sources] == [("clickstream", "clickstream"), ("orders", "orders")]
    for key in ("checkpoint_path", "dead_letter_path", "lake_path"):
        assert len({_text(s[key]) for s in sources}) == 2, key  # each source its own
    assert "/checkpoints/orders/" in _text(sources[1]["checkpoint_path"])
    # the undeclared environments and their jobs are untouched: one job per source there
    assert len([v for v in _of_type(templates["staging"], "AWS::Glue::Job").values()
                if v["Properties"]["Command"]["Name"] == "gluestreaming"]) == 2


def test_the_shared_role_reads_exactly_its_sources_and_writes_exactly_their_datasets(shared_dev):
    (job,) = [v for k, v in _streaming_jobs(shared_dev).items() if k.startswith("StreamingJobIngest")]
    role = job["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [st for policy in _of_type(shared_dev, "AWS::IAM::Policy").values()
                  if {"Ref": role} in policy["Properties"]["Roles"] for st in policy["Properties"]["PolicyDocument"]["Statement"]]
    text = _text(statements)
    streams = {v["Properties"]["Name"].removeprefix("streamlake-dev-"): k for k, v in _of_type(shared_dev, "AWS::Kinesis::Stream").items()}
    assert sorted(streams) == ["clickstream", "events", "orders"]
    assert all(f'"{streams[source]}"' in text for source in ("clickstream", "orders"))  # reads both its streams
    assert f'"{streams["events"]}"' not in text  # and not the stream of the job beside it
    for prefix in ("/events/*", "/orders/*", "/dead_letters/clickstream/*", "/dead_letters/orders/*",
                   "/checkpoints/clickstream/*", "/checkpoints/orders/*"):
        assert prefix in text, prefix
    for prefix in ("/page_views/*", "/checkouts/*", "/dead_letters/events/*", "/checkpoints/events/*"):
        assert prefix not in text, prefix  # the routed source's, written by its own job
    catalog = next(st for st in statements if st.get("Sid") == "ReadOwnCatalogTables")
    tables = sorted(r["Fn::Join"][1][-1].split("/")[-1] for r in catalog["Resource"] if ":table/" in r["Fn::Join"][1][-1])
    assert tables == ["events", "orders", "source_clickstream", "source_orders"]  # its sources' and datasets', no other


def test_the_keeper_deploys_and_alarms_the_job_once_and_each_source_keeps_its_own_alarms(shared_dev):
    deploys = _of_type(shared_dev, "Custom::StreamingJobDeploy")
    # one for the shared job of clickstream and orders, one for events' job of its own
    assert sorted(_construct(k) for k in deploys) == ["JobKeeperDeployEvents", "JobKeeperDeployIngest"]
    alarms = _of_type(shared_dev, "AWS::CloudWatch::Alarm")
    for kind in ("NotRunning", "RestartsCapped", "OutagePastHalfRetention"):
        assert sorted(_construct(k) for k in alarms if k.startswith(f"Monitoring{kind}")) == [
            f"Monitoring{kind}Events", f"Monitoring{kind}Ingest"], kind
    for source in ("Clickstream", "Orders"):
        (lag,) = [v for k, v in alarms.items() if k.startswith(f"MonitoringConsumerLag{source}")]
        # Glue's consumer-lag metric is the job's: a source of a shared job alarms on its own ArrivalLagMs
        assert lag["Properties"]["MetricName"] == "ArrivalLagMs"
        assert {"Name": "Source", "Value": source.lower()} in lag["Properties"]["Dimensions"]
        (overrun,) = [v for k, v in alarms.items() if k.startswith(f"MonitoringBatchOverrun{source}")]
        assert overrun["Properties"]["Threshold"] == 30_000  # the job's own window
    (overrun,) = [v for k, v in alarms.items() if k.startswith("MonitoringBatchOverrunEvents")]
    assert overrun["Properties"]["Threshold"] == 60_000  # events' job of its own: dev's `streaming` window
    outputs = shared_dev["Outputs"]
    named = {k.removeprefix("StreamingJobName"): v["Value"] for k, v in outputs.items() if k.startswith("StreamingJobName")}
    assert sorted(named) == ["Clickstream", "Events", "Orders"]
    (ingest,) = [k for k in _streaming_jobs(shared_dev) if k.startswith("StreamingJobIngest")]
    assert named["Clickstream"] == named["Orders"] == {"Ref": ingest} != named["Events"]  # each names the one job


def test_make_diff_names_each_moved_source_and_refuses_a_move_the_keeper_could_not_stop(templates):
    """dev as shipped (clickstream, orders and its routed stream events in "ingest") against dev with a job per
    source: the three sources move into the new job, and the report says so. The keeper may stop the old job's run when it carries the checkpoint-bucket
    tag, or all of the environment's tags (a job deployed before that tag); against a base whose jobs carry
    neither, the move is refused (the keeper could not stop the old run)."""
    import copy

    from devtools import diff
    from devtools.snapshot import normalize, synth_templates
    from infra.functions.job_keeper.handler import CHECKPOINT_BUCKET_TAG

    raw = json.loads(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    separate = synth_templates(["dev"], config=parse_config(update_raw(raw, "dev", "streaming_jobs", [])))["dev"]
    old_t, new_t = normalize(separate), normalize(templates["dev"])
    moves = diff.source_moves(old_t, new_t)
    assert [(m.source, m.old_job.split("Job")[1], m.new_job.startswith("StreamingJobIngest"), m.old_job_stoppable)
            for m in moves] == [("clickstream", "Clickstream", True, True), ("events", "Events", True, True),
                                ("orders", "Orders", True, True)]
    changes = diff.diff_templates(old_t, new_t)
    text = diff.render_environment("dev", changes, diff.CostRange(1, 1), diff.CostRange(1, 1),
                                   diff.streaming_restarts(old_t, new_t, changes), moves)
    assert "moves 3 source(s) to another streaming job" in text and "⛔" not in text
    assert diff.source_moves(old_t, old_t) == []

    def without(template: dict, tags: set[str]) -> dict:
        stripped = copy.deepcopy(template)
        for resource in stripped["Resources"].values():
            if resource["Type"] == "AWS::Glue::Job":
                resource["Properties"]["Tags"] = {k: v for k, v in resource["Properties"].get("Tags", {}).items() if k not in tags}
        return stripped

    before_the_tag = diff.source_moves(without(old_t, {CHECKPOINT_BUCKET_TAG}), new_t)
    assert [m.old_job_stoppable for m in before_the_tag] == [True, True, True]  # dev's tags: project, environment
    for tags in ({CHECKPOINT_BUCKET_TAG, "environment"}, {CHECKPOINT_BUCKET_TAG, "project", "environment"}):
        refused = diff.source_moves(without(old_t, tags), new_t)
        assert [m.old_job_stoppable for m in refused] == [False, False, False], tags  # one tag of the environment's is not all
    assert "⛔ the old job carries neither the tag `streamlake:checkpoint-bucket` nor all of the environment's tags" in \
        diff.render_environment("dev", changes, diff.CostRange(1, 1), diff.CostRange(1, 1), {}, refused)
