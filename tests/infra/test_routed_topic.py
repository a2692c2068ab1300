"""A routed MSK topic in the config: one topic whose frames are several datasets, each routed by the registry schema
that wrote it (docs/kafka.md "One topic, several datasets"). Here staging's topic (orders, as shipped) carries page_views
too, by config `msk.datasets`. What the environment synthesizes: each dataset's registry schema, lake table and
dead-letter table, the source's unroutable dead letters, the job's `--sources` entry the Glue entrypoint reads back
(routes {registry schema: dataset}, no `schema_name`), a role and a producer policy naming each dataset's schema, the
unroutable-share alarm; and what `make diff` says of turning the shipped topic into a routed one (the job would refuse
the source's checkpoint) and of a dataset joining the topic (nothing replaced, nothing refused)."""

from __future__ import annotations

import copy
import json

import pytest

from devtools.template_sources import job_sources
from glue_jobs import datasets
from infra.config import DEFAULT_CONFIG_PATH, ConfigError, parse_config

SHIPPED = json.loads(DEFAULT_CONFIG_PATH.read_text())
ROUTED = ("orders", "page_views")


def topic_config(datasets_: tuple[str, ...] = ROUTED, **msk) -> dict:
    """The shipped config with staging's topic carrying `datasets_` (`dataset` null: the defaults give one)."""
    raw = copy.deepcopy(SHIPPED)
    raw["environments"]["staging"]["msk"].update({"dataset": None, "datasets": list(datasets_), **msk})
    return raw


def _problems(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse_config(raw)
    return refused.value.problems


def _of_type(template: dict, kind: str) -> dict:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


@pytest.fixture(scope="module")
def templates():
    """staging as shipped (its committed snapshot), with its topic routed (orders, page_views) under the shipped source
    name and under a new one, and with checkouts joining the routed topic by one more name in `msk.datasets`."""
    from devtools.snapshot import normalize, snapshot_path, synth_templates

    def synth(raw: dict) -> dict:
        return normalize(synth_templates(["staging"], config=parse_config(raw))["staging"])

    shipped = normalize(json.loads(snapshot_path("staging").read_text(encoding="utf-8")))
    renamed = synth(topic_config(source_name="orders-mix"))
    joined = synth(topic_config((*ROUTED, "checkouts"), source_name="orders-mix"))
    return {"shipped": shipped, "routed": synth(topic_config()), "renamed": renamed, "joined": joined}


def test_the_config_reads_a_routed_topic_and_refuses_what_it_cannot_route_naming_the_key():
    env = parse_config(topic_config()).get("staging")
    assert env.msk.routed and env.msk.dataset is None and env.carried["orders"] == ROUTED
    assert env.routed == {"orders": "schema"} and env.routes == {}  # routed by schema, not by a field
    assert env.sources_of("page_views") == ("orders",) and "page_views" in env.datasets
    single = parse_config(SHIPPED).get("staging")
    assert not single.msk.routed and single.carried["orders"] == ("orders",) and single.routed == {}
    where = "staging.msk"
    both = topic_config()
    both["environments"]["staging"]["msk"]["dataset"] = "orders"
    assert f"{where}.dataset: 'orders' must be null when `datasets` is given: a topic of several datasets routes each " \
           "frame to the dataset whose registry schema wrote it" in _problems(both)
    assert f"{where}.datasets: 'page_viewz' is not a dataset (datasets/: {', '.join(datasets.names())})" in _problems(
        topic_config(("orders", "page_viewz")))
    assert f"{where}.datasets: 'orders' is named more than once" in _problems(topic_config(("orders", "orders")))
    assert f"{where}.datasets: 'orders' must be a list of dataset names (the datasets the topic's frames are)" in _problems(
        _raw_datasets("orders"))
    iceberg = topic_config()
    iceberg["environments"]["staging"]["table_formats"] = {"page_views": "iceberg"}
    assert "staging.msk.datasets: dataset 'page_views' is Iceberg in this environment; a routed topic carries Parquet " \
           "datasets (give it a topic of its own)" in _problems(iceberg)


def _raw_datasets(value) -> dict:
    raw = topic_config()
    raw["environments"]["staging"]["msk"]["datasets"] = value
    return raw


def test_each_dataset_gets_its_schema_and_tables_and_the_topic_its_unroutable_dead_letters(templates):
    template = templates["routed"]
    tables = {t["TableInput"]["Name"] for t in _of_type(template, "AWS::Glue::Table").values()}
    assert {"orders", "page_views", "dead_letters_orders_orders", "dead_letters_orders_page_views",
            "dead_letters_orders_unroutable"} <= tables
    assert "dead_letters_orders" not in tables  # the source's folder holds parts, each with its own table
    schemas = {s["Name"] for s in _of_type(template, "AWS::Glue::Schema").values()}
    assert {datasets.load(name).avro_full_name for name in ROUTED} <= schemas
    (unroutable,) = [a for k, a in _of_type(template, "AWS::CloudWatch::Alarm").items()
                     if k.startswith("MonitoringUnroutableShareOrders")]
    assert {"RecordsIn", "UnroutableRecords"} <= {m.get("MetricStat", {}).get("Metric", {}).get("MetricName")
                                                   for m in unroutable["Metrics"]}


def test_the_jobs_sources_entry_routes_by_each_datasets_registry_schema_as_the_entrypoint_reads_it(templates):
    from glue_jobs import glue_entry
    from glue_jobs.decoding.schema_routes import SchemaRoutes

    template = templates["routed"]
    (orders,) = [s for j in _of_type(template, "AWS::Glue::Job").values() if "--sources" in j["DefaultArguments"]
                 for s in job_sources(j["DefaultArguments"]) if s["source_name"] == "orders"]
    assert set(orders) == set(glue_entry.source_keys("kafka", routed=ROUTED)) and "schema_name" not in orders
    schema_names = {datasets.load(name).avro_full_name: name for name in ROUTED}
    assert (orders["route_field"], json.loads(orders["routes"]), orders["datasets"]) == (
        "schema", schema_names, "orders,page_views")
    # Resolved as CloudFormation would, the entry passes the entrypoint's checks and makes the router's table.
    resolved = {key: value if isinstance(value, str) else f"s3://resolved/{key}" for key, value in orders.items()}
    resolved["registry_name"] = "streamlake-staging"
    (flat,) = glue_entry.job_sources({"sources": json.dumps([resolved]), "environment": "staging"})
    table = glue_entry.route_table(flat)
    assert isinstance(table, SchemaRoutes) and table.datasets == ROUTED and table.registry == "streamlake-staging"
    # A Kafka entry routed by a field, or a Kinesis one by schema, is refused naming the source
    for wrong in ({**resolved, "route_field": "kind"}, {**resolved, "source_type": "kinesis"}):
        with pytest.raises(ValueError, match=r"--sources\[0\] \(orders\): a routed source is a Kinesis one routed by a field"):
            glue_entry.job_sources({"sources": json.dumps([wrong])})


def test_the_role_and_the_producer_policy_name_each_datasets_schema(templates):
    template = templates["routed"]
    schema_ids = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::Glue::Schema"
                  and r["Properties"]["Name"] in {datasets.load(n).avro_full_name for n in ROUTED}}
    assert len(schema_ids) == 2
    reads = [s for p in _of_type(template, "AWS::IAM::Policy").values() for s in p["PolicyDocument"]["Statement"]
             if s.get("Sid") == "ReadEventSchema"]
    (producer,) = [s for p in _of_type(template, "AWS::IAM::ManagedPolicy").values() for s in p["PolicyDocument"]["Statement"]
                   if s.get("Sid") == "NewestSchemaVersion"]
    for statement in (*reads, producer):
        named = {r["Fn::GetAtt"][0] for r in statement["Resource"] if isinstance(r, dict) and "Fn::GetAtt" in r}
        assert schema_ids <= named, statement
    assert reads


def test_make_diff_says_the_job_would_refuse_the_shipped_topics_checkpoint_and_a_new_name_deploys(templates):
    from devtools.diff import _change_lines, diff_templates

    routed = diff_templates(templates["shipped"], templates["routed"])
    (refusing,) = [c for c in routed if c.refused_checkpoints]
    assert refusing.deploy_fails and refusing.type == "AWS::Glue::Job"
    (why,) = refusing.refused_checkpoints
    assert why.startswith("source orders: its checkpoint belongs to dataset orders, the job now runs it as routed by schema")
    assert "the job will refuse a checkpoint" in _change_lines(refusing)[0]
    # Under a new source name: a new checkpoint, nothing refused or failing (the job's Glue connections and the source's
    # named Athena query take the new name: replaced, as any renamed source's are); what goes is the old job's log groups,
    # which `make diff` refuses without ALLOW_DATA_LOSS=1 as for any renamed source
    renamed = diff_templates(templates["shipped"], templates["renamed"])
    assert not [c for c in renamed if c.deploy_fails]
    assert {(c.type, c.kind) for c in renamed if c.data_loss} == {("AWS::Logs::LogGroup", "removed")}


def test_a_dataset_joining_the_routed_topic_is_added_in_the_diff_and_nothing_is_replaced(templates):
    from devtools.diff import diff_templates

    changes = diff_templates(templates["renamed"], templates["joined"])
    assert not [c for c in changes if c.deploy_fails or c.data_loss or c.kind == "replaced"]
    added = {c.logical_id for c in changes if c.kind == "added"}
    assert any(i.startswith("CatalogSchemaCheckouts") for i in added)
    assert any(i.startswith("CatalogDeadLetterTableOrdersMixCheckouts") for i in added)
    (job,) = [c for c in changes if c.type == "AWS::Glue::Job" and "OrdersMix" in c.logical_id]
    paths = {path for path, _, _ in job.changes}
    assert {"Properties.DefaultArguments.--sources.orders-mix.routes", "Properties.DefaultArguments.--sources.orders-mix.datasets",
            "Properties.DefaultArguments.--sources.orders-mix.dataset_digest.checkouts"} <= paths


def test_sizing_a_routed_topic_sums_its_datasets_rates_and_states_each_share(monkeypatch, capsys):
    from devtools import sizing

    monkeypatch.setattr(sizing, "load_config", lambda: parse_config(topic_config()))
    common = ["--environment", "staging", "--source", "orders", "--record-kb", "1", "--latency-seconds", "60",
              "--records-per-core-per-second", "2000"]
    sizing.main([*common, "--dataset-rate", "orders=300", "--dataset-rate", "page_views=100"])
    out = capsys.readouterr().out
    assert "routed topic orders: 400 records/s, the sum of its datasets'" in out
    assert "orders               300 records/s (75%)" in out and "page_views           100 records/s (25%)" in out
    assert "load: 400 events/s x 1 KB" in out  # sized on the sum
    assert sizing.main([*common, "--dataset-rate", "orders=300"]) == 2
    assert "--dataset-rate names orders; topic source 'orders' routes to orders, page_views" in capsys.readouterr().err
    monkeypatch.setattr(sizing, "load_config", lambda: parse_config(SHIPPED))
    assert sizing.main([*common, "--dataset-rate", "orders=300"]) == 2
    assert "topic source 'orders' of environment 'staging' is not routed (it carries orders)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sizing.main([*common, "--stream", "clickstream", "--dataset-rate", "orders=1"])
    assert "--source names a routed MSK topic's source" in capsys.readouterr().err
