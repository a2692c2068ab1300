"""A routed Kinesis stream in the config: one stream whose records are several datasets, routed by a declared field
(docs/datasets.md "One stream, several datasets"). dev ships one, `events`, carrying page_views and checkouts by
`kind`; a team's sensor_readings (docs/examples/routed/datasets, its files copied beside datasets/) joins it by one
route value. What the environment synthesizes: each dataset's lake table and dead-letter table, the source's own dead
letters, the job's `--sources` entry the Glue entrypoint reads back, a role writing exactly those prefixes, the
per-dataset alarms on the source's per-dataset metrics and the unroutable-share alarm; and what a dataset joining the
route adds in `make diff`."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from devtools.template_sources import job_sources
from glue_jobs import datasets
from infra.config import DEFAULT_CONFIG_PATH, REPO_ROOT, ConfigError, parse_config

JOINING = REPO_ROOT / "docs" / "examples" / "routed" / "datasets" / "sensor_readings"
SHIPPED = json.loads(DEFAULT_CONFIG_PATH.read_text())
(STREAM,) = [s for s in SHIPPED["environments"]["dev"]["kinesis_streams"] if "route" in s]  # dev's `events`
WHERE = f"dev.kinesis_streams[{SHIPPED['environments']['dev']['kinesis_streams'].index(STREAM)}]"


def routed_config(stream: dict = STREAM) -> dict:
    """The shipped config with dev's routed stream replaced by `stream` (as shipped by default)."""
    raw = copy.deepcopy(SHIPPED)
    streams = raw["environments"]["dev"]["kinesis_streams"]
    streams[streams.index(STREAM)] = copy.deepcopy(stream)
    return raw


def test_dev_ships_a_routed_stream_in_its_shared_job():
    env = parse_config(SHIPPED).get("dev")
    assert STREAM["name"] == "events" and env.routes["events"].field == "kind"
    assert env.carried["events"] == ("checkouts", "page_views")
    assert [(g.name, g.sources) for g in env.job_groups] == [("ingest", ("clickstream", "orders", "events"))]


@pytest.fixture(scope="module")
def team_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("routed-team") / "datasets"
    shutil.copytree(REPO_ROOT / "datasets", root)
    shutil.copytree(JOINING, root / JOINING.name)
    return root


@pytest.fixture
def team(team_root, monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(team_root))
    return team_root


@pytest.fixture(scope="module")
def templates(team_root):
    """dev synthesized as shipped (its routed stream), and with sensor_readings joining the route by one config line."""
    from devtools.snapshot import synth_templates

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(datasets.ROOT_VARIABLE, str(team_root))
        before = synth_templates(["dev"], config=parse_config(routed_config()))["dev"]
        joined = copy.deepcopy(STREAM)
        joined["route"]["values"]["reading"] = "sensor_readings"
        after = synth_templates(["dev"], config=parse_config(routed_config(joined)))["dev"]
    return before, after


def _of_type(template: dict, kind: str) -> dict:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def _problems(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    return refused.value.problems


def test_the_config_refuses_a_route_it_cannot_follow_naming_the_key(team):
    env = parse_config(routed_config()).get("dev")
    assert env.carried["events"] == ("checkouts", "page_views") and env.routes["events"].field == "kind"
    assert env.sources_of("page_views") == ("events",) and "checkouts" in env.datasets
    where = WHERE
    both = {**STREAM, "dataset": "orders"}
    assert f"{where}.dataset: 'orders' must be left out of a routed stream: its `route` names its datasets" in _problems(
        routed_config(both))
    unknown = {**STREAM, "route": {"field": "kind", "values": {"page_view": "page_viewz"}}}
    assert any(p.startswith(f"{where}.route.values: 'page_viewz' is not a dataset") for p in _problems(routed_config(unknown)))
    absent = {**STREAM, "route": {"field": "type", "values": {"page_view": "page_views"}}}
    assert any(p.startswith(f"{where}.route: dataset page_views: the route field type must be a string or enum field")
               for p in _problems(routed_config(absent)))
    shape = {**STREAM, "route": {"field": "kind"}}
    assert any(p.startswith(f"{where}.route: ") and "exactly `field`" in p for p in _problems(routed_config(shape)))
    iceberg = routed_config()
    iceberg["environments"]["dev"]["table_formats"] = {"checkouts": "iceberg"}
    assert f"{WHERE}.route.values: dataset 'checkouts' is Iceberg in this environment; a routed stream " \
           "carries Parquet datasets (route it from a stream of its own)" in _problems(iceberg)


def test_each_dataset_gets_its_tables_and_the_source_its_own_dead_letters(templates, team):
    template, _ = templates
    tables = {t["TableInput"]["Name"]: t["TableInput"] for t in _of_type(template, "AWS::Glue::Table").values()}
    assert {"page_views", "checkouts", "dead_letters_events_page_views", "dead_letters_events_checkouts",
            "dead_letters_events_unroutable", "source_events"} <= set(tables)
    assert "dead_letters_events" not in tables  # no table over the source's folder as a whole: its parts differ
    assert [(c["Name"], c["Type"]) for c in tables["source_events"]["StorageDescriptor"]["Columns"]] == [("kind", "string")]
    location = tables["dead_letters_events_unroutable"]["StorageDescriptor"]["Location"]
    assert [p for p in location["Fn::Join"][1] if isinstance(p, str)] == ["s3://", "/dead_letters/events/unroutable/"]
    outputs = template["Outputs"]
    assert {"DeadLetterTableNameEventsPageViews", "DeadLetterTableNameEventsUnroutable"} <= set(outputs)
    # the shipped sources keep their tables and outputs as they were
    assert {"dead_letters_clickstream", "dead_letters_orders", "events", "orders"} <= set(tables)
    assert "DeadLetterTableNameClickstream" in outputs


def test_the_jobs_sources_entry_is_what_the_entrypoint_reads_back(templates, team):
    from glue_jobs import glue_entry

    template, _ = templates
    (job,) = [j for j in _of_type(template, "AWS::Glue::Job").values() if j["Command"]["Name"] == "gluestreaming"]
    (events,) = [s for s in job_sources(job["DefaultArguments"]) if s["source_name"] == "events"]
    assert set(events) == set(glue_entry.source_keys("kinesis", routed=("checkouts", "page_views")))
    assert (events["route_field"], json.loads(events["routes"]), events["datasets"]) == (
        "kind", {"checkout": "checkouts", "page_view": "page_views"}, "checkouts,page_views")
    assert events["dataset_digest.page_views"] == datasets.load("page_views").digest
    assert [p for p in events["lake_path.page_views"]["Fn::Join"][1] if isinstance(p, str)] == ["s3://", "/page_views"]
    # Resolved as CloudFormation would, the entry passes the entrypoint's checks, with the job's own arguments.
    resolved = {key: value if isinstance(value, str) else f"s3://lake-bucket/{key.split('.')[-1]}"
                for key, value in events.items()}
    resolved["dead_letter_path"], resolved["checkpoint_path"] = "s3://dead/dead_letters/events", "s3://cp/checkpoints/events/"
    (flat,) = glue_entry.job_sources({"sources": json.dumps([resolved]), "environment": "dev"})
    assert flat["environment"] == "dev" and glue_entry.routed_datasets(flat) == ("checkouts", "page_views")


def test_the_role_writes_each_routed_datasets_lake_and_the_alarms_watch_each_dataset(templates, team):
    template, _ = templates
    policies = json.dumps([p for p in _of_type(template, "AWS::IAM::Policy").values()
                           if "StreamingJobIngest" in json.dumps(p.get("Roles", ""))])
    for prefix in ("page_views", "checkouts", "dead_letters/events", "checkpoints/events"):
        assert f"/{prefix}/*" in policies, prefix
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    (unroutable,) = [a for k, a in alarms.items() if k.startswith("MonitoringUnroutableShareEvents")]
    names = {m.get("MetricStat", {}).get("Metric", {}).get("MetricName") for m in unroutable["Metrics"]}
    assert {"RecordsIn", "UnroutableRecords"} <= names
    (rate,) = [a for k, a in alarms.items() if k.startswith("MonitoringDeadLetterRatePageViews")]
    dims = [{d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"]["Dimensions"]}
            for m in rate["Metrics"] if "MetricStat" in m]
    assert {"Source": "events", "Dataset": "page_views", "Environment": "dev"} in dims  # its part, not the source's sum
    (clicks,) = [a for k, a in alarms.items() if k.startswith("MonitoringDeadLetterRateClickstream")]
    assert all("Dataset" not in json.dumps(m) for m in clicks["Metrics"])  # an unrouted dataset's alarm as it was


def test_a_dataset_joining_the_route_is_added_in_the_diff_and_nothing_is_replaced(templates, team):
    from devtools.diff import diff_templates
    from devtools.snapshot import normalize

    before, after = templates
    changes = diff_templates(normalize(before), normalize(after))
    assert not [c for c in changes if c.deploy_fails or c.data_loss or c.kind == "replaced"]
    added = {c.logical_id for c in changes if c.kind == "added"}
    assert any(i.startswith("CatalogSchemaSensorReadings") for i in added)
    assert any(i.startswith("CatalogDeadLetterTableEventsSensorReadings") for i in added)
    jobs = [c for c in changes if c.type == "AWS::Glue::Job"]
    assert {c.kind for c in jobs} == {"modified"}  # the shared job and the compaction (its lake tables)
    (job,) = [c for c in jobs if "Ingest" in c.logical_id]
    paths = [path for path, _, _ in job.changes]
    assert {"Properties.DefaultArguments.--sources.events.routes", "Properties.DefaultArguments.--sources.events.datasets",
            "Properties.DefaultArguments.--sources.events.dataset_digest.sensor_readings"} <= set(paths)


def test_sizing_a_routed_stream_keeps_its_route_in_the_fragment_to_paste(team):
    """`streamlake sizing --environment dev --stream events` prints the whole kinesis_streams list to paste: the routed
    stream keeps its route (not a `dataset` of null), and the list, pasted, is a valid config."""
    from devtools.sizing import Load, recommend, sized_streams

    raw = routed_config()
    rec = recommend(Load(events_per_second=500, record_kb=1, latency_seconds=60, records_per_core_per_second=2000))
    streams = sized_streams(parse_config(raw).get("dev"), rec, "events", None, None)
    (events,) = [s for s in streams if s["name"] == "events"]
    assert "dataset" not in events and events["route"] == STREAM["route"] and events["shard_count"] == rec.kinesis_shards
    raw["environments"]["dev"]["kinesis_streams"] = streams
    assert parse_config(raw).get("dev").routes["events"].datasets == ("checkouts", "page_views")


def test_sizing_a_routed_stream_sums_its_datasets_rates_and_states_each_share(team, monkeypatch, capsys):
    from devtools import sizing

    monkeypatch.setattr(sizing, "load_config", lambda: parse_config(routed_config()))
    common = ["--environment", "dev", "--stream", "events", "--record-kb", "1", "--latency-seconds", "60",
              "--records-per-core-per-second", "2000"]
    sizing.main([*common, "--dataset-rate", "page_views=400", "--dataset-rate", "checkouts=100"])
    out = capsys.readouterr().out
    assert "routed stream events: 500 records/s, the sum of its datasets'" in out
    assert "page_views           400 records/s (80%)" in out and "checkouts            100 records/s (20%)" in out
    assert "load: 500 events/s x 1 KB" in out  # sized on the sum
    assert sizing.main([*common, "--dataset-rate", "page_views=400"]) == 2
    assert "--dataset-rate names page_views; stream 'events' routes to checkouts, page_views" in capsys.readouterr().err
    clicks = [*common[:3], "clickstream", *common[4:], "--dataset-rate", "clickstream=10"]
    assert sizing.main(clicks) == 2
    assert "stream 'clickstream' of environment 'dev' is not routed (it carries clickstream)" in capsys.readouterr().err
    for bad, message in ((["--dataset-rate", "page_views"], "is not DATASET=RECORDS_PER_SECOND"),
                         (["--dataset-rate", "page_views=1", "--events-per-second", "5"], "give one")):
        with pytest.raises(SystemExit):
            sizing.main([*common, *bad])
        assert message in capsys.readouterr().err
