"""Catalog: database, Schema Registry, source tables (Kinesis JSON; a Kafka source has none),
the lake table and the dead-letter tables with partition projection."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3 as s3

from glue_jobs import datasets, schema
from infra.catalog import Catalog
from tests.infra.bare import bare_stack, instance_named

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@pytest.fixture(scope="module")
def built():
    stack = bare_stack("Catalog")
    lake, dead = s3.Bucket(stack, "Lake"), s3.Bucket(stack, "Dead")
    stream = kinesis.Stream(stack, "Clicks", stream_name="streamlake-qa-clickstream")
    catalog = Catalog(
        stack, "Catalog", project="streamlake", environment="qa",
        lake_bucket=lake, datasets=[datasets.load("clickstream")],
        carried={"clickstream": ("clickstream",), "orders": ("clickstream",)}, routed={}, dead_letter_bucket=dead, dead_letter_prefix="dead_letters",
        dead_letter_retention_days=365, streams={"clickstream": stream},
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    template = assertions.Template.from_stack(stack)
    ids = {name: stack.get_logical_id(c.node.default_child) for name, c in (("lake", lake), ("dead", dead), ("stream", stream))}
    return stack, catalog, template, ids


def _tables(template) -> dict[str, dict]:
    return {t["Properties"]["TableInput"]["Name"]: t for t in template.find_resources("AWS::Glue::Table").values()}


def _columns(columns) -> list[dict]:
    return [{"Name": n, "Type": t} for n, t in columns]


def _s3(bucket_id: str, suffix: str) -> dict:
    return {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, suffix]]}


def test_names_exposed_for_jobs_tools_and_alarms(built):
    _, catalog, _, _ = built
    assert catalog.database_name == "streamlake_qa"
    assert catalog.schema_name == "com.streamlake.events.Event"
    assert cdk.Stack.of(catalog).resolve(catalog.registry_name) == instance_named("streamlake-qa")
    # Only the Kinesis source has a table: the Kafka job reads the topic with Spark's Kafka source (docs/kafka.md).
    assert catalog.source_table_names == {"clickstream": "source_clickstream"}
    assert catalog.lake_table_names == {"clickstream": "events"}
    assert catalog.dead_letter_table_names == {"clickstream": "dead_letters_clickstream", "orders": "dead_letters_orders"}


def test_database_registry_and_backward_compatible_avro_schema(built):
    stack, catalog, template, _ = built
    template.has_resource_properties("AWS::Glue::Database", {"DatabaseInput": assertions.Match.object_like({"Name": "streamlake_qa"})})
    # retained: named per stack instance (infra/naming.py)
    template.has_resource_properties("AWS::Glue::Registry", {"Name": instance_named("streamlake-qa")})
    (schema_resource,) = template.find_resources("AWS::Glue::Schema").values()
    assert schema_resource["Properties"] == {
        "Name": "com.streamlake.events.Event",
        "Registry": {"Arn": {"Fn::GetAtt": [stack.get_logical_id(catalog.registry), "Arn"]}},
        "DataFormat": "AVRO",
        "Compatibility": "BACKWARD",
        "SchemaDefinition": schema.avro_schema_definition(),
        "Description": "Generated from schemas/event.avsc",
    }
    # Registered schema versions are kept with a retaining environment; the database and tables hold no data
    # and are rebuilt from the template, so they go with the stack (a kept one would block re-creating it).
    policies = {r["Type"]: r["DeletionPolicy"] for r in template.to_json()["Resources"].values()
                if r["Type"].startswith("AWS::Glue::")}
    assert policies == {"AWS::Glue::Registry": "Retain", "AWS::Glue::Schema": "Retain",
                        "AWS::Glue::Database": "Delete", "AWS::Glue::Table": "Delete"}


def test_kinesis_source_table(built):
    _, _, template, ids = built
    table = _tables(template)["source_clickstream"]["Properties"]["TableInput"]
    params = {
        "typeOfData": "kinesis",
        "streamARN": {"Fn::GetAtt": [ids["stream"], "Arn"]},
        "classification": "json",
        "endpointUrl": {"Fn::Join": ["", ["https://kinesis.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]},
    }
    assert table == {
        "Name": "source_clickstream",
        "Description": "Kinesis stream of source clickstream (JSON, one event per record)",
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"EXTERNAL": "TRUE", **params},
        "StorageDescriptor": {
            "Columns": _columns(schema.source_columns()),
            "Location": {"Ref": ids["stream"]},
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
            "Parameters": params,
        },
    }


def test_a_kafka_source_has_no_source_table_but_its_dead_letter_table(built):
    _, _, template, _ = built
    assert "source_orders" not in _tables(template) and "dead_letters_orders" in _tables(template)
    assert not [t for t in _tables(template).values() if "SchemaReference" in t["Properties"]["TableInput"]["StorageDescriptor"]]


def test_lake_table_parquet_partitioned_with_projection(built):
    _, _, template, ids = built
    table = _tables(template)["events"]["Properties"]["TableInput"]
    assert table["PartitionKeys"] == [{"Name": "event_date", "Type": "string"}, {"Name": "event_hour", "Type": "int"}]
    assert table["StorageDescriptor"]["Columns"] == _columns(schema.lake_columns())
    assert table["StorageDescriptor"]["Location"] == _s3(ids["lake"], "/events/")
    assert table["StorageDescriptor"]["SerdeInfo"] == {"SerializationLibrary": PARQUET_SERDE}
    assert table["Parameters"] == {
        "EXTERNAL": "TRUE",
        "classification": "parquet",
        "parquet.compression": "SNAPPY",
        "projection.enabled": "true",
        "projection.event_date.type": "date",
        "projection.event_date.format": "yyyy-MM-dd",
        "projection.event_date.range": "2000-01-01,NOW+1DAYS",
        "projection.event_date.interval": "1",
        "projection.event_date.interval.unit": "DAYS",
        "projection.event_hour.type": "integer",
        "projection.event_hour.range": "0,23",
        "storage.location.template": _s3(ids["lake"], "/events/event_date=${event_date}/event_hour=${event_hour}/"),
    }


def test_dead_letter_table_per_source_where_the_job_writes(built):
    _, _, template, ids = built
    tables = _tables(template)
    for source in ("clickstream", "orders"):
        table = tables[f"dead_letters_{source}"]["Properties"]["TableInput"]
        assert table["PartitionKeys"] == [{"Name": "ingest_date", "Type": "string"}]
        assert table["StorageDescriptor"]["Columns"] == _columns(schema.dead_letter_columns())
        assert table["StorageDescriptor"]["Location"] == _s3(ids["dead"], f"/dead_letters/{source}/")
        assert table["Parameters"]["projection.ingest_date.range"] == "NOW-365DAYS,NOW"
        assert table["Parameters"]["storage.location.template"] == _s3(ids["dead"], f"/dead_letters/{source}/ingest_date=${{ingest_date}}/")


@pytest.fixture(scope="module")
def orders_built():
    stack = bare_stack("CatalogOrders")
    lake = s3.Bucket(stack, "Lake")
    catalog = Catalog(
        stack, "Catalog", project="streamlake", environment="qa", lake_bucket=lake,
        datasets=[datasets.load("orders")], carried={"orders": ("orders",)}, routed={}, dead_letter_bucket=s3.Bucket(stack, "Dead"),
        dead_letter_prefix="dead_letters", dead_letter_retention_days=365, streams={},
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    return stack, catalog, assertions.Template.from_stack(stack), {"lake": stack.get_logical_id(lake.node.default_child)}


def test_a_nested_dataset_gets_its_own_registry_schema(orders_built):
    stack, catalog, template, _ = orders_built
    orders = datasets.load("orders")
    schemas = template.find_resources("AWS::Glue::Schema")
    # A registry schema per dataset the catalog carries: orders only (clickstream's EventSchema comes with clickstream).
    (order_schema,) = schemas.values()
    assert order_schema["Properties"]["Name"] == "com.streamlake.orders.Order"
    assert catalog.schema_name is None and catalog.dataset_schemas["orders"][0] == "com.streamlake.orders.Order"
    assert json.loads(order_schema["Properties"]["SchemaDefinition"]) == orders.avro(1)
    assert catalog.lake_table_names == {"orders": "orders"}


def test_a_nested_dataset_gets_its_own_typed_lake_table(orders_built):
    _, _, template, ids = orders_built
    table = _tables(template)["orders"]["Properties"]["TableInput"]
    assert table["StorageDescriptor"]["Columns"] == _columns([
        ("order_id", "string"), ("ordered_at", "timestamp"), ("customer_id", "string"), ("status", "string"),
        ("currency", "string"), ("total", "decimal(12,2)"),
        ("items", "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>"),
        ("shipping", "struct<country:string,city:string,express:boolean>"), ("coupons", "map<string,int>"),
        ("source", "string"), ("source_partition", "string"), ("source_offset", "string"), ("arrival_time", "timestamp"),
        ("batch_id", "bigint"),
    ])
    assert table["PartitionKeys"] == [{"Name": "event_date", "Type": "string"}, {"Name": "event_hour", "Type": "int"}]
    assert table["StorageDescriptor"]["Location"] == _s3(ids["lake"], "/orders/")
    assert table["Parameters"]["projection.event_date.range"] == "2000-01-01,NOW+1DAYS"  # from not_before, max_future
    assert table["Parameters"]["storage.location.template"] == _s3(ids["lake"], "/orders/event_date=${event_date}/event_hour=${event_hour}/")


