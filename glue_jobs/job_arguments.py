"""The streaming job's argument contract: the job's own arguments and the keys of each source's object in `--sources`
(glue_jobs/glue_entry.py reads them; the stack writes them, infra/streaming_job.py; the rehearsal and `make diff` read
them back). Pure Python: it imports without Spark or Glue."""

from __future__ import annotations

import json

GLUE_SUPPLIED_ARGUMENTS = ("JOB_NAME",)
JOB_ARGUMENTS = (
    "JOB_NAME",
    "environment",
    "catalog_database",
    "window_size_seconds",
    "batch_max_retries",
    "metrics_namespace",
    "metrics_region",
    "sources",
)
SOURCE_KEYS = (
    "source_name",
    "source_type",
    "dataset",
    "dataset_digest",
    "lake_path",
    "dead_letter_path",
    "checkpoint_path",
    "starting_position",
)
SOURCE_TYPE_KEYS = {
    "kinesis": ("max_fetch_records_per_shard", "max_fetch_time_ms", "source_table", "min_partitions"),
    "kafka": ("max_offsets_per_trigger", "bootstrap_servers", "topic", "registry_name", "schema_name", "kafka_auth",
              "partitions", "min_partitions"),
}


# A routed source (docs/datasets.md "One stream, several datasets"): the field and {value: dataset} as JSON text
# (glue_jobs/decoding/routes.py RouteTable), the datasets it writes, comma-separated, and for each of them the keys of
# DATASET_KEYS suffixed with `.<dataset>`: a change to one dataset's files or lake is that key's change in a diff.
# Each dataset's dead letters go to `<dead_letter_path>/<dataset>`, the records no route takes to
# `<dead_letter_path>/unroutable` (glue_jobs/routed_batch.py). Its datasets are Parquet ones. A routed Kafka topic
# (glue_jobs/decoding/schema_routes.py) has `route_field` ROUTED_BY_SCHEMA and `routes` {registry schema: dataset}, and
# no `schema_name` (the routes name each dataset's schema in `registry_name`).
ROUTED_KEYS = (
    "source_name",
    "source_type",
    "route_field",
    "routes",
    "datasets",
    "dead_letter_path",
    "checkpoint_path",
    "starting_position",
)
DATASET_KEYS = ("dataset_digest", "lake_path")
ROUTED_BY_SCHEMA = "schema"  # glue_jobs/decoding/schema_routes.FIELD (this module imports without Spark)


# An Iceberg dataset's source: the Data Catalog table it commits to and the table's location (under the dataset's lake
# prefix). Glue adds Iceberg's jars with `--datalake-formats iceberg`. The environment decides a dataset's table format
# (config `table_formats` over dataset.json's `table_format`), so the job learns it from its arguments, not from the
# dataset files in its zip: the stack gives `lake_table` to an Iceberg dataset's source and to no other.
ICEBERG_KEYS = ("lake_table", "lake_table_location")
TABLE_FORMATS = ("parquet", "iceberg")


def job_arguments() -> tuple[str, ...]:
    """Every argument the entrypoint reads (the infra contract test and the rehearsal compare these)."""
    return JOB_ARGUMENTS


def source_keys(source_type: str, table_format: str = "parquet", routed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every key of one source's object in `--sources`, for its type and table format; `routed`: the datasets of a
    routed source (ROUTED_KEYS)."""
    if source_type not in SOURCE_TYPE_KEYS:
        raise ValueError(f"source_type {source_type!r} is not one of {sorted(SOURCE_TYPE_KEYS)}")
    if table_format not in TABLE_FORMATS:
        raise ValueError(f"table_format {table_format!r} is not one of {', '.join(TABLE_FORMATS)}")
    if routed:
        own = tuple(key for key in SOURCE_TYPE_KEYS[source_type] if key != "schema_name")
        return ROUTED_KEYS + own + tuple(f"{key}.{name}" for name in routed for key in DATASET_KEYS)
    return SOURCE_KEYS + SOURCE_TYPE_KEYS[source_type] + (ICEBERG_KEYS if table_format == "iceberg" else ())


def routed_datasets(source: dict) -> tuple[str, ...]:
    """The datasets a routed source writes (its `datasets` key), or () for a source of one dataset."""
    if "route_field" not in source:
        return ()
    return tuple(name for name in str(source.get("datasets", "")).split(",") if name)


def job_sources(args: dict[str, str]) -> list[dict[str, str]]:
    """Each source of `--sources` as one flat argument dict (the job's arguments, `sources` left out, with the
    source's keys), in the order given. Refuses what the stack would never write, naming the source and the key: not a
    JSON list of objects, none, a key missing or unknown for the source's type, a value that is not a string, two
    sources of one name, checkpoint or dead-letter location (two queries on one checkpoint corrupt it)."""
    try:
        sources = json.loads(args["sources"])
    except ValueError as e:
        raise ValueError(f"--sources is not JSON: {e}") from None
    if not isinstance(sources, list) or not sources or not all(isinstance(s, dict) for s in sources):
        raise ValueError("--sources must be a JSON list of at least one object (one per source the job runs)")
    flat, seen = [], {"source_name": {}, "checkpoint_path": {}, "dead_letter_path": {}}
    job = {name: value for name, value in args.items() if name != "sources"}
    for index, source in enumerate(sources):
        label = f"--sources[{index}] ({source.get('source_name', 'unnamed')})"
        table_format = "iceberg" if ICEBERG_KEYS[0] in source else "parquet"
        if source.get("source_type") not in SOURCE_TYPE_KEYS:
            raise ValueError(f"{label}: source_type {source.get('source_type')!r} is not one of {sorted(SOURCE_TYPE_KEYS)}")
        routed = routed_datasets(source)
        if "route_field" in source and (not routed or (source["route_field"] == ROUTED_BY_SCHEMA) != (source["source_type"] == "kafka")):
            raise ValueError(f"{label}: a routed source is a Kinesis one routed by a field or a Kafka one routed by "
                             f"{ROUTED_BY_SCHEMA!r}, with at least one dataset in `datasets`")
        expected = set(source_keys(source["source_type"], table_format, routed))
        missing, unknown = sorted(expected - set(source)), sorted(set(source) - expected)
        if missing or unknown:
            raise ValueError(f"{label}: " + "; ".join(
                part for part in (f"missing key(s) {missing}" if missing else "", f"unknown key(s) {unknown}" if unknown else "") if part))
        not_text = sorted(key for key, value in source.items() if not isinstance(value, str))
        if not_text:
            raise ValueError(f"{label}: value(s) of {not_text} must be strings, as job arguments are")
        for key, owners in seen.items():
            if source[key] in owners:
                raise ValueError(f"{label}: {key} {source[key]!r} is also --sources[{owners[source[key]]}]'s")
            owners[source[key]] = index
        flat.append({**job, **source})
    return flat
