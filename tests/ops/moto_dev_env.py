"""A deployed `dev` environment in moto: the resources and the stack outputs the tools read.

The names are what infra/ deploys (stream `streamlake-dev-clickstream`, tables from
infra.catalog.table_name, ...); the stack is a stand-in whose outputs carry those names, because
moto cannot deploy the real template (Glue jobs, registry schemas).
"""

from __future__ import annotations

import json

from glue_jobs import schema as event_schema
from operations import resources

ACCOUNT = "123456789012"
REGION = "eu-west-1"
ENV = "dev"
STACK = "streamlake-dev"
SOURCE = "clickstream"
STREAM = "streamlake-dev-clickstream"
DATABASE = "streamlake_dev"
SOURCE_TABLE = "source_clickstream"
LAKE_TABLE = "events"
REGISTRY = "streamlake-dev"
SCHEMA = "com.streamlake.events.Event"  # infra.catalog names the schema after the Avro full name
STREAMING_JOB = "streamlake-dev-streaming-clickstream"
COMPACTION_JOB = "streamlake-dev-compaction"
LAKE_BUCKET = "streamlake-dev-lake"
CHECKPOINT_BUCKET = "streamlake-dev-checkpoints"
DEAD_LETTER_BUCKET = "streamlake-dev-dead-letters"
CHECKPOINT_PATH = f"s3://{CHECKPOINT_BUCKET}/checkpoints/{SOURCE}/"
ORDERS_CHECKPOINT_PATH = f"s3://{CHECKPOINT_BUCKET}/checkpoints/orders/"
EVENTS_STREAM = "streamlake-dev-events"  # dev's routed stream (page_views, checkouts by `kind`)
EVENTS_CHECKPOINT_PATH = f"s3://{CHECKPOINT_BUCKET}/checkpoints/events/"
DEAD_LETTER_PATH = f"s3://{DEAD_LETTER_BUCKET}/dead_letters/{SOURCE}"

OUTPUTS = {
    resources.KINESIS_STREAM_NAME.format(source="Clickstream"): STREAM,
    resources.STREAMING_JOB_NAME.format(source="Clickstream"): STREAMING_JOB,
    resources.CHECKPOINT_PATH.format(source="Clickstream"): CHECKPOINT_PATH,
    # dev runs orders and events in the same job as clickstream (config `streaming_jobs` "ingest"): its outputs name that job
    resources.STREAMING_JOB_NAME.format(source="Orders"): STREAMING_JOB,
    resources.CHECKPOINT_PATH.format(source="Orders"): ORDERS_CHECKPOINT_PATH,
    resources.STREAMING_JOB_NAME.format(source="Events"): STREAMING_JOB,
    resources.KINESIS_STREAM_NAME.format(source="Events"): EVENTS_STREAM,
    resources.CHECKPOINT_PATH.format(source="Events"): EVENTS_CHECKPOINT_PATH,
    resources.DEAD_LETTER_PATH.format(source="Clickstream"): DEAD_LETTER_PATH,
    resources.SOURCE_TABLE_NAME.format(source="Clickstream"): SOURCE_TABLE,
    resources.LAKE_TABLE_NAME: LAKE_TABLE,
    resources.CATALOG_DATABASE_NAME: DATABASE,
    resources.SCHEMA_REGISTRY_NAME: REGISTRY,
    resources.EVENT_SCHEMA_NAME: SCHEMA,
    resources.COMPACTION_JOB_NAME: COMPACTION_JOB,
}


def deploy(session, endpoint_url: str | None = None, outputs: dict[str, str] | None = None) -> None:
    def client(service):
        return session.client(service, region_name=REGION, endpoint_url=endpoint_url)

    outputs = OUTPUTS if outputs is None else outputs
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template))

    client("kinesis").create_stream(StreamName=STREAM, ShardCount=2)
    client("kinesis").create_stream(StreamName=EVENTS_STREAM, ShardCount=1)
    s3 = client("s3")
    for bucket in (LAKE_BUCKET, CHECKPOINT_BUCKET, DEAD_LETTER_BUCKET):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})

    glue = client("glue")
    glue.create_database(DatabaseInput={"Name": DATABASE})
    glue.create_table(DatabaseName=DATABASE, TableInput={
        "Name": SOURCE_TABLE,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"typeOfData": "kinesis", "streamName": STREAM, "classification": "json"},
        "StorageDescriptor": {
            "Columns": [{"Name": n, "Type": t} for n, t in event_schema.source_columns()],
            "Location": STREAM,
            "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
            "Parameters": {"typeOfData": "kinesis", "streamName": STREAM},
        },
    })
    glue.create_table(DatabaseName=DATABASE, TableInput={
        "Name": LAKE_TABLE,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet", "projection.enabled": "true"},
        "PartitionKeys": [{"Name": n, "Type": t} for n, t in event_schema.lake_partition_columns()],
        "StorageDescriptor": {
            "Columns": [{"Name": n, "Type": t} for n, t in event_schema.lake_columns()],
            "Location": f"s3://{LAKE_BUCKET}/events/",
            "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"},
        },
    })
    glue.create_registry(RegistryName=REGISTRY)
    glue.create_schema(RegistryId={"RegistryName": REGISTRY}, SchemaName=SCHEMA, DataFormat="AVRO",
                       Compatibility="BACKWARD", SchemaDefinition=event_schema.avro_schema_definition())
    for name, command in ((STREAMING_JOB, "gluestreaming"), (COMPACTION_JOB, "glueetl")):
        glue.create_job(Name=name, Role="arn:aws:iam::123456789012:role/glue", GlueVersion="4.0",
                        Command={"Name": command, "ScriptLocation": "s3://assets/entrypoint.py"},
                        ExecutionProperty={"MaxConcurrentRuns": 1})


def glue_backend():
    from moto.glue.models import glue_backends

    return glue_backends[ACCOUNT][REGION]


def job_definition_changed(job_name: str) -> None:
    """What a deploy that changes a job's arguments does to it (UpdateJob, which moto lacks): LastModifiedOn is now,
    and at least a second after every run's start, since a moto server's responses carry whole seconds (a run started
    in the same second would otherwise read as started on the new code)."""
    import datetime

    from moto.core.utils import utcnow

    job = glue_backend().jobs[job_name]
    starts = [run.started_on for run in job.job_runs if getattr(run, "started_on", None) is not None]
    job.last_modified_on = max([utcnow(), *(s + datetime.timedelta(seconds=1) for s in starts)])


def mark_runs_running(job_name: str) -> None:
    """moto starts runs in STARTING; a streaming job that is up is RUNNING."""
    for run in glue_backend().jobs[job_name].job_runs:
        if run.status == "STARTING":
            run.status = "RUNNING"


def schema_with(extra_fields: list[dict] | None = None, drop: tuple[str, ...] = (), retype: dict | None = None) -> dict:
    schema = json.loads(event_schema.avro_schema_definition())
    fields = [f for f in schema["fields"] if f["name"] not in drop]
    for f in fields:
        if retype and f["name"] in retype:
            f["type"] = retype[f["name"]]
    schema["fields"] = fields + list(extra_fields or [])
    return schema
