"""Capacity planning: from a stated load to shards, partitions, Glue workers, window and cost.

    streamlake sizing --events-per-second 10000 --record-kb 1 --latency-seconds 120 \\
        --records-per-core-per-second 25000 [--environment prod] [--json]
    streamlake sizing --iceberg [DATASET ...] [--environment prod]   # what Iceberg adds, per environment
    streamlake sizing --group clicks:50:1 --group orders:20:2 ...     # which datasets share a streaming job

(`python -m devtools.sizing` is the same.)

The recommendation can be pasted into config/environments.json; with --environment it keeps to the worker
types that environment allows (no G.025X in prod), and the command also checks that environment's config
against the load and warns where it under-provisions.
Every rule is written out below with the AWS limit it comes from. Prices: config/prices.json.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infra.config import (
    REPO_ROOT,
    STREAMING_WORKER_TYPES,
    ConfigError,
    EnvironmentConfig,
    load_config,
    streaming_worker_types,
)
from infra.constants import SHARD_LEVEL_METRICS
from infra.runtimes import RUNTIMES
from streamlake.options import Parser, exit_codes

PRICES_PATH = REPO_ROOT / "config" / "prices.json"
BENCH_RESULT_PATH = REPO_ROOT / "bench-output" / "bench.json"

# Kinesis Data Streams per-shard limits (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html):
KINESIS_SHARD_IN_BYTES = 1_000_000  # 1 MB/s write
KINESIS_SHARD_IN_RECORDS = 1_000  # 1,000 records/s write
KINESIS_SHARD_OUT_BYTES = 2_000_000  # 2 MB/s read (shared by consumers without enhanced fan-out)
# A Kafka partition is consumed by one Spark task; keep each partition well under what one core parses.
KAFKA_PARTITION_TARGET_BYTES = 5_000_000
# Spark executor cores per Glue worker (Glue 3.0 and later: G.025X 2 vCPUs, G.1X 4, G.2X 8, worker types in
# the Glue API). One worker is the driver. The same for every version the config allows (infra/runtimes.py).
_CORES = {"G.025X": 2, "G.1X": 4, "G.2X": 8}
CORES_PER_WORKER = {version: dict(_CORES) for version in RUNTIMES}
# Worker-type choice: G.025X suits small streams (AWS positions it for low-volume streaming); past
# these executor counts a larger worker keeps the executor count (and shuffle fan-out) manageable.
G025X_MAX_EXECUTORS = 4
G1X_MAX_EXECUTORS = 30
MAX_WORKERS = 299
# Headroom on the stated load and the catch-up factor for per-batch fetch limits.
DEFAULT_HEADROOM = 0.3
CATCH_UP_FACTOR = 2


class SizingError(ValueError):
    pass


@dataclass(frozen=True)
class Load:
    events_per_second: float
    record_kb: float
    latency_seconds: float
    records_per_core_per_second: float
    headroom: float = DEFAULT_HEADROOM

    def __post_init__(self) -> None:
        checks = [
            ("events_per_second", self.events_per_second, 0 < self.events_per_second <= 10_000_000),
            ("record_kb", self.record_kb, 0 < self.record_kb <= 1024),
            ("latency_seconds", self.latency_seconds, 2 <= self.latency_seconds <= 86_400),
            ("records_per_core_per_second", self.records_per_core_per_second, 0 < self.records_per_core_per_second),
            ("headroom", self.headroom, 0 <= self.headroom <= 10),
        ]
        bad = [f"{name}: {value!r} is out of range" for name, value, ok in checks if not ok]
        if bad:
            raise SizingError("; ".join(bad))

    @property
    def design_events_per_second(self) -> float:
        return self.events_per_second * (1 + self.headroom)

    @property
    def design_bytes_per_second(self) -> float:
        return self.design_events_per_second * self.record_kb * 1000


@dataclass
class Recommendation:
    kinesis_shards: int
    kinesis_shards_by: str
    kafka_partitions: int
    cores_needed: int
    worker_type: str
    max_workers: int
    window_size_seconds: int
    max_fetch_records_per_shard: int
    max_offsets_per_trigger: int
    expected_batch_seconds: float
    monthly_cost: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def config_fragment(self, streams: list[dict] | None = None) -> dict:
        """The part of an environment block in config/environments.json this recommends. `streams`: the environment's
        whole `kinesis_streams` list with the sized stream in it (a list replaces the environment's, so a fragment with
        one entry would drop its other streams); without, one entry with placeholders for what the load does not say."""
        sized = {"name": "<stream name: --stream>", "dataset": "<dataset: --dataset>", "capacity_mode": "provisioned",
                 "shard_count": self.kinesis_shards, "retention_hours": 24}
        return {
            "kinesis_streams": streams if streams is not None else [sized],
            "msk": {"topic_partitions": self.kafka_partitions},
            "streaming": {
                "worker_type": self.worker_type,
                "max_workers": self.max_workers,
                "window_size_seconds": self.window_size_seconds,
                "max_fetch_records_per_shard": self.max_fetch_records_per_shard,
                "max_offsets_per_trigger": self.max_offsets_per_trigger,
            },
        }


def load_prices(path: Path = PRICES_PATH) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def kinesis_shards(load: Load) -> tuple[int, str]:
    """Shards for the design load: the largest of bytes in, records in and bytes out."""
    needs = {
        "bytes in (1 MB/s per shard)": load.design_bytes_per_second / KINESIS_SHARD_IN_BYTES,
        "records in (1,000/s per shard)": load.design_events_per_second / KINESIS_SHARD_IN_RECORDS,
        "bytes out (2 MB/s per shard)": load.design_bytes_per_second / KINESIS_SHARD_OUT_BYTES,
    }
    limiting = max(needs, key=lambda k: needs[k])
    return max(1, math.ceil(needs[limiting] - 1e-9)), limiting


def choose_workers(cores_needed: int, glue_version: str,
                   worker_types: tuple[str, ...] = STREAMING_WORKER_TYPES) -> tuple[str, int]:
    """Smallest sensible worker type among `worker_types` (those the environment allows), and max workers =
    executors needed + 1 driver."""
    cores = CORES_PER_WORKER[glue_version]
    ladder = (("G.025X", G025X_MAX_EXECUTORS), ("G.1X", G1X_MAX_EXECUTORS), ("G.2X", MAX_WORKERS - 1))
    for worker_type, limit in ladder:
        if worker_type not in worker_types:
            continue
        executors = max(1, math.ceil(cores_needed / cores[worker_type]))
        if executors <= limit:
            return worker_type, executors + 1
    raise SizingError(f"{cores_needed} cores need more than {MAX_WORKERS} G.2X workers: split the stream")


def recommend(load: Load, *, glue_version: str = "4.0", worker_types: tuple[str, ...] = STREAMING_WORKER_TYPES,
              prices: dict | None = None, compaction_minutes: float = 5.0, compaction_workers: int = 2,
              flex: bool = True) -> Recommendation:
    shards, limiting = kinesis_shards(load)
    cores_needed = max(1, math.ceil(load.design_events_per_second / load.records_per_core_per_second))
    worker_type, max_workers = choose_workers(cores_needed, glue_version, worker_types)
    partitions = max(math.ceil(load.design_bytes_per_second / KAFKA_PARTITION_TARGET_BYTES), cores_needed)
    # A record waits up to one window, then its batch is processed: keep the window at half the
    # latency target so window + batch time (<= window while the job keeps up) stays under target.
    window = max(1, int(load.latency_seconds // 2))
    executor_cores = (max_workers - 1) * CORES_PER_WORKER[glue_version][worker_type]
    expected_batch = window * load.events_per_second / (executor_cores * load.records_per_core_per_second)
    per_batch = load.design_events_per_second * window * CATCH_UP_FACTOR
    rec = Recommendation(
        kinesis_shards=shards,
        kinesis_shards_by=limiting,
        kafka_partitions=partitions,
        cores_needed=cores_needed,
        worker_type=worker_type,
        max_workers=max_workers,
        window_size_seconds=window,
        max_fetch_records_per_shard=max(100, math.ceil(per_batch / shards)),
        max_offsets_per_trigger=max(100, math.ceil(per_batch)),
        expected_batch_seconds=round(expected_batch, 2),
    )
    rec.monthly_cost = load_cost(load, rec, prices or load_prices(), compaction_minutes=compaction_minutes,
                                 compaction_workers=compaction_workers, flex=flex)
    return rec


def load_cost(load: Load, rec: Recommendation, prices: dict, *, compaction_minutes: float,
              compaction_workers: int, flex: bool) -> dict[str, float]:
    """Monthly USD for the stated (not design) load on the recommended capacity."""
    hours = prices["hours_per_month"]
    seconds = hours * 3600
    k, g, m, s3 = prices["kinesis"], prices["glue"], prices["msk"], prices["s3"]
    records_month = load.events_per_second * seconds
    gb_month = records_month * load.record_kb / 1e6
    put_units = records_month * math.ceil(load.record_kb / k["put_payload_unit_kb"])
    glue_streaming = rec.max_workers * g["dpu_per_worker"][rec.worker_type] * hours * g["dpu_hour"]
    compaction_rate = g["flex_dpu_hour"] if flex else g["dpu_hour"]
    compaction_hours = max(compaction_minutes, g["minimum_billed_minutes"]) / 60
    glue_compaction = compaction_workers * g["dpu_per_worker"]["G.1X"] * compaction_hours * hours * compaction_rate
    cost = {
        "kinesis_provisioned": rec.kinesis_shards * hours * k["provisioned_shard_hour"]
        + put_units / 1e6 * k["provisioned_put_payload_units_per_million"],
        "kinesis_on_demand": hours * k["on_demand_stream_hour"] + gb_month * (k["on_demand_gb_in"] + k["on_demand_gb_out"]),
        "glue_streaming": glue_streaming,
        "glue_compaction": glue_compaction,
        "msk_serverless": hours * (m["serverless_cluster_hour"] + rec.kafka_partitions * m["serverless_partition_hour"])
        + gb_month * (m["serverless_gb_in"] + m["serverless_gb_out"]),
        # Parquet typically stores JSON events at a quarter of their size or less; one month's data.
        "s3_lake_first_month": gb_month / 4 * s3["standard_gb_month"],
    }
    return {key: round(value, 2) for key, value in cost.items()}


# The fewest workers an auto-scaled streaming run is billed for: its driver and one executor. AWS's
# auto-scaling pages say idle executors and their workers are removed but name no floor, so this
# figure is unverified; it only sets the low end of the range `make diff` shows.
MIN_STREAMING_WORKERS = 2


# What an Iceberg dataset (`"table_format": "iceberg"`, docs/iceberg.md) adds to the bill: the requests of one commit
# per micro-batch and of the hourly maintenance, and the maintenance's Glue time against the compaction it replaces.
# Figures marked ESTIMATE come from reading the job's code path and Iceberg's, not from a bill or a trace on AWS.
#
# Prices, us-east-1, read 2026-11-26 through the search tool (the stored pages show no date of their own):
# - S3 GET: $0.0004 per 1,000 (S3 Standard "GET, SELECT, and all other requests"); PUT and LIST: config/prices.json
#   s3.put_per_thousand, $0.005 per 1,000 ("LIST requests for any storage class are charged at the same rate as S3
#   Standard PUT, COPY, and POST requests"); DELETE is free. https://aws.amazon.com/s3/pricing/
S3_GET_PER_THOUSAND = 0.0004
# - Glue Data Catalog requests: the first million a month free, then $1.00 per million ("You will be billed for one
#   million requests above the free tier, which is $1", https://aws.amazon.com/lake-formation/pricing/, the Glue
#   pricing example it repeats; AWS's price list: "$1 per 1,000,000 requests for AWS Glue Data Catalog request").
#   The free million is per account and shared with every other caller (Athena, crawlers, the other environments
#   of the account), so each request here is priced as a marginal one: the free tier is not deducted.
GLUE_CATALOG_PER_MILLION_REQUESTS = 1.00
GLUE_CATALOG_FREE_REQUESTS_PER_MONTH = 1_000_000
# - S3 Tables (for the comparison in docs/iceberg.md "When S3 Tables would replace this"): object monitoring $0.025 per
#   1,000 objects a month; compaction $0.002 per 1,000 objects processed and $0.005 per GB processed (binpack, the
#   default); storage $0.0265 per GB-month for the first 50 TB against S3 Standard's $0.023; requests at S3
#   Standard's rates. https://aws.amazon.com/s3/pricing/ ("S3 Tables pricing", US East (N. Virginia)).
S3_TABLES_MONITORING_PER_THOUSAND_OBJECTS = 0.025
S3_TABLES_COMPACTION_PER_THOUSAND_OBJECTS = 0.002
S3_TABLES_COMPACTION_PER_GB = 0.005
S3_TABLES_STORAGE_GB_MONTH = 0.0265
#
# Requests of one commit. Iceberg's spec (https://iceberg.apache.org/spec/): "All changes to table state create a new
# metadata file and replace the old metadata with an atomic swap"; "A new manifest list is written for each attempt
# to commit a snapshot"; an append's new data files are tracked by a new manifest (manifests of earlier snapshots are
# reused). So a commit PUTs at least: a metadata.json, a manifest list, a manifest.
ICEBERG_METADATA_FILES_PER_COMMIT = 3
# GlueCatalog (apache/iceberg aws/.../glue/GlueTableOperations.java): a table load or refresh is one GetTable
# (doRefresh), and a commit refreshes first (SnapshotProducer.apply) and then GetTable + UpdateTable (doCommit, the
# UpdateTable conditioned on the table's VersionId). The job's catalog has no table cache (glue_jobs/session.py), so
# each of a batch's three table reads loads the table again: the snapshot-tag lookup, the duplicate check and the
# append (glue_jobs/lake/iceberg_lake.py). ESTIMATE: Spark may load a table more than once per statement.
GLUE_REQUESTS_PER_COMMIT = 3
STREAMING_TABLE_LOADS_PER_BATCH = 3
# S3 GETs of one batch's metadata: a metadata.json per table load (the refresh before the commit finds the same
# location and reads nothing), the parent's manifest list (the append's apply) and the committed one (the cleanup after
# the commit), and the duplicate check's scan: one manifest list and the manifests of the batch's hours (below).
MANIFEST_LIST_READS_PER_COMMIT = 2
# The duplicate check reads the key and event time of the data files in the hours the batch touches. Until the hourly
# rewrite_manifests and rewrite_data_files, each commit of each source adds a manifest and a data file to the current
# hour, so a batch reads on average half of an hour's: (commits an hour x sources of the dataset) / 2, plus the one
# manifest and one file the maintenance left. ESTIMATE: two GETs per Parquet file (footer, then the columns).
PARQUET_GETS_PER_FILE_READ = 2
# The hourly maintenance (compaction/iceberg_maintenance.py): four procedures, each loading the table; three commit
# (rewrite_data_files, rewrite_manifests, expire_snapshots); remove_orphan_files lists every object under the table's
# location (S3 LIST returns at most 1,000 keys a call). The rewrite's own reads and writes of data files stand in for
# the Parquet compaction's and are not counted here.
MAINTENANCE_TABLE_LOADS_PER_RUN = 4
MAINTENANCE_COMMITS_PER_RUN = 3
LIST_KEYS_PER_REQUEST = 1_000
# Objects under an Iceberg table's location, for the orphan listing and S3 Tables' per-object monitoring: per snapshot
# kept by expire_snapshots (compaction.iceberg_snapshot_retention_hours) its manifest list, its manifest and its data
# file; the 100 earlier metadata.json kept by METADATA_LIMITS (glue_jobs/lake/iceberg_lake.py); and the compacted files of
# every hour partition the table holds. ESTIMATE: a table one year old, one compacted file per hour.
ICEBERG_METADATA_VERSIONS_KEPT = 100
ICEBERG_TABLE_AGE_HOURS = 24 * 365
# Maintenance against compaction, measured: the maintenance of 2,000 small files took 0.95x the hourly compaction of
# as many files (docs/iceberg.md "Benchmark", 2026-11-26, this project's 2-core machine; not measured on Glue). An
# Iceberg dataset's maintenance replaces its compaction in the same hourly job, so its Glue time is priced as that
# dataset's share of the compaction run scaled by this ratio (ESTIMATE: the share is the run split evenly by dataset).
MAINTENANCE_TO_COMPACTION_RATIO = 0.95


# environment_cost's keys of the items iceberg_dataset_cost adds (`make diff` shows their sum apart).
ICEBERG_COST_PREFIXES = ("iceberg_commits:", "iceberg_maintenance:", "iceberg_maintenance_glue:")


@dataclass(frozen=True)
class IcebergRequests:
    """Requests a month that an Iceberg dataset adds, by kind, and their monthly USD."""

    s3_put: float = 0.0
    s3_get: float = 0.0
    s3_list: float = 0.0
    glue_catalog: float = 0.0

    def usd(self, prices: dict) -> float:
        put_rate = prices["s3"]["put_per_thousand"] / 1_000  # PUT and LIST
        return (self.s3_put * put_rate + self.s3_list * put_rate + self.s3_get * S3_GET_PER_THOUSAND / 1_000
                + self.glue_catalog * GLUE_CATALOG_PER_MILLION_REQUESTS / 1e6)


@dataclass(frozen=True)
class IcebergDatasetCost:
    """What making `dataset` an Iceberg table adds to an environment a month (docs/iceberg.md "What Iceberg adds to the
    bill"): per source carrying it, its commits and their requests; per dataset, the hourly maintenance's requests and
    Glue time against the compaction it replaces; and, for comparison, what S3 Tables would charge to maintain it."""

    dataset: str
    commits_per_month: dict[str, float]  # per source
    streaming: dict[str, IcebergRequests]  # per source
    maintenance: IcebergRequests
    compaction_share_usd: float  # the dataset's share of the hourly compaction run today (Parquet)
    table_objects: int
    s3_tables_monitoring_usd: float
    s3_tables_compaction_objects_usd: float

    @property
    def maintenance_glue_usd(self) -> float:
        """The maintenance's Glue time less the compaction it replaces (negative: cheaper, as measured)."""
        return self.compaction_share_usd * (MAINTENANCE_TO_COMPACTION_RATIO - 1)

    def cost_items(self, prices: dict) -> dict[str, float]:
        """Monthly USD keyed as environment_cost keys its items."""
        items = {f"iceberg_commits:{source}": requests.usd(prices) for source, requests in self.streaming.items()}
        items[f"iceberg_maintenance:{self.dataset}"] = self.maintenance.usd(prices)
        items[f"iceberg_maintenance_glue:{self.dataset}"] = self.maintenance_glue_usd
        return items


def iceberg_dataset_cost(env: EnvironmentConfig, dataset: str, prices: dict | None = None, *,
                         compaction_minutes: float = 5.0) -> IcebergDatasetCost:
    """The Iceberg figures of `dataset` in `env` (the constants above say where each comes from). A micro-batch with
    records commits once; the figures take every window of the month to carry records, the upper bound (Glue's
    forEachBatch skips an empty batch: awsglue/context.py, `if num_records > 0`)."""
    p = prices or load_prices()
    sources = list(env.sources_of(dataset))
    if not sources:
        raise SizingError(f"{env.name}: no source carries dataset {dataset!r} (carried: {', '.join(env.datasets)})")
    hours = p["hours_per_month"]
    # A source commits once per window of the job that runs it (a job declared in streaming_jobs has its own).
    commits_of = {source: 3600 / env.job_of(source).settings.window_size_seconds * hours for source in sources}
    commits_per_hour = sum(commits_of.values()) / hours  # of every source carrying the dataset
    # The manifests (and as many data files) a batch's duplicate check reads, on average: the one the last maintenance
    # left and half of those the hour's commits of every source carrying the dataset have added since.
    scanned = 1 + commits_per_hour / 2
    metadata_gets = STREAMING_TABLE_LOADS_PER_BATCH + MANIFEST_LIST_READS_PER_COMMIT
    scan_gets = 1 + scanned + scanned * PARQUET_GETS_PER_FILE_READ  # its manifest list, manifests, data files
    streaming = {source: IcebergRequests(
        s3_put=commits * ICEBERG_METADATA_FILES_PER_COMMIT,
        s3_get=commits * (metadata_gets + scan_gets),
        glue_catalog=commits * (STREAMING_TABLE_LOADS_PER_BATCH + GLUE_REQUESTS_PER_COMMIT),
    ) for source, commits in commits_of.items()}
    retained_snapshots = env.compaction.iceberg_snapshot_retention_hours * (commits_per_hour + MAINTENANCE_COMMITS_PER_RUN)
    files_per_snapshot = 3  # its manifest list, its manifest, its data file
    table_objects = math.ceil(retained_snapshots * files_per_snapshot + ICEBERG_METADATA_VERSIONS_KEPT
                              + ICEBERG_TABLE_AGE_HOURS)
    runs = hours  # hourly (compaction.schedule), as glue_compaction prices it
    maintenance = IcebergRequests(
        s3_put=runs * MAINTENANCE_COMMITS_PER_RUN * ICEBERG_METADATA_FILES_PER_COMMIT,
        s3_get=runs * (MAINTENANCE_TABLE_LOADS_PER_RUN + MAINTENANCE_COMMITS_PER_RUN * MANIFEST_LIST_READS_PER_COMMIT),
        s3_list=runs * math.ceil(table_objects / LIST_KEYS_PER_REQUEST),
        glue_catalog=runs * (MAINTENANCE_TABLE_LOADS_PER_RUN + MAINTENANCE_COMMITS_PER_RUN * GLUE_REQUESTS_PER_COMMIT),
    )
    g = p["glue"]
    rate = g["flex_dpu_hour"] if env.compaction.flex else g["dpu_hour"]
    share_hours = max(compaction_minutes, g["minimum_billed_minutes"]) / 60 / len(env.datasets)
    dataset_compaction = env.compaction.workers * g["dpu_per_worker"][env.compaction.worker_type] * share_hours * runs * rate
    data_files_month = sum(commits_of.values())
    return IcebergDatasetCost(
        dataset=dataset,
        commits_per_month=commits_of,
        streaming=streaming,
        maintenance=maintenance,
        compaction_share_usd=dataset_compaction,
        table_objects=table_objects,
        s3_tables_monitoring_usd=table_objects * S3_TABLES_MONITORING_PER_THOUSAND_OBJECTS / 1_000,
        s3_tables_compaction_objects_usd=data_files_month * S3_TABLES_COMPACTION_PER_THOUSAND_OBJECTS / 1_000,
    )


def iceberg_in(env: EnvironmentConfig, declared_iceberg: Collection[str]) -> list[str]:
    """The datasets of `env` whose table is Iceberg there: its `table_formats` entry, else their dataset.json's
    (`declared_iceberg`: the datasets whose dataset.json says iceberg)."""
    return sorted(d for d in env.datasets
                  if env.table_format(d, "iceberg" if d in declared_iceberg else "parquet") == "iceberg")


def environment_cost(env: EnvironmentConfig, prices: dict | None = None, *, compaction_minutes: float = 5.0,
                     streaming_workers: str = "max", iceberg_datasets: Collection[str] = ()) -> dict[str, float]:
    """Fixed monthly capacity cost of an environment's config (usage not included), plus what the Iceberg datasets
    among `iceberg_datasets` add (iceberg_dataset_cost: their commits at one per window, and their maintenance).

    Used by `make diff` for the cost of a config change: shard-hours, on-demand stream-hours, Glue
    DPU-hours (streaming 24x7, hourly compaction), MSK broker-hours and storage. The network (NAT
    gateways, interface endpoints) is priced from the template instead (devtools/diff.py), since what the
    stack builds there follows from code as much as from config. Auto scaling decides
    the streaming workers: `streaming_workers="max"` prices every job at `max_workers`, "min" at
    MIN_STREAMING_WORKERS (or max_workers if that is lower).
    """
    if streaming_workers not in ("max", "min"):
        raise ValueError(f"streaming_workers: {streaming_workers!r} is not 'max' or 'min'")
    p = prices or load_prices()
    hours = p["hours_per_month"]
    k, g, m = p["kinesis"], p["glue"], p["msk"]
    cost: dict[str, float] = {}
    for s in env.kinesis_streams:
        if s.capacity_mode == "provisioned":
            cost[f"kinesis:{s.name}"] = s.shard_count * hours * k["provisioned_shard_hour"]
            # Retention above 24 hours is billed per shard-hour (up to 7 days); above 7 days per GB stored (usage).
            if s.retention_hours > 24:
                cost[f"kinesis_retention:{s.name}"] = s.shard_count * hours * k["extended_retention_shard_hour"]
            # One CloudWatch metric per shard and shard-level metric (infra/streams.py). On-demand streams have them too,
            # over a shard count Kinesis chooses: not priced.
            cost[f"kinesis_shard_metrics:{s.name}"] = s.shard_count * len(SHARD_LEVEL_METRICS) * p["cloudwatch"]["metric_month"]
        else:
            cost[f"kinesis:{s.name}"] = hours * k["on_demand_stream_hour"]
    dpu = g["dpu_per_worker"]
    for job in env.job_groups:  # one Glue job per group, sized by its own settings (a job of one source: the source's)
        workers = job.settings.max_workers
        if streaming_workers == "min":
            workers = min(workers, MIN_STREAMING_WORKERS)
        cost[f"glue_streaming:{job.name}"] = workers * dpu[job.settings.worker_type] * hours * g["dpu_hour"]
    rate = g["flex_dpu_hour"] if env.compaction.flex else g["dpu_hour"]
    run_hours = max(compaction_minutes, g["minimum_billed_minutes"]) / 60
    cost["glue_compaction"] = env.compaction.workers * dpu[env.compaction.worker_type] * run_hours * hours * rate
    if env.msk.mode == "provisioned":
        broker = m["broker_hour"].get(env.msk.broker_instance_type)
        if broker is None:
            raise SizingError(
                f"{env.name}.msk.broker_instance_type: {env.msk.broker_instance_type!r} has no price in "
                f"config/prices.json (priced: {', '.join(m['broker_hour'])})"
            )
        cost["msk_brokers"] = env.msk.broker_count * hours * broker
        cost["msk_storage"] = env.msk.broker_count * env.msk.broker_volume_gb * m["storage_gb_month"]
    elif env.msk.mode == "serverless":
        cost["msk_serverless"] = hours * (m["serverless_cluster_hour"] + env.msk.topic_partitions * m["serverless_partition_hour"])
    for dataset in iceberg_in(env, iceberg_datasets):
        cost.update(iceberg_dataset_cost(env, dataset, p, compaction_minutes=compaction_minutes).cost_items(p))
    return {key: round(value, 2) for key, value in cost.items()}


def check_environment(env: EnvironmentConfig, load: Load, rec: Recommendation) -> list[str]:
    """Warnings where the environment's config under-provisions for the stated load."""
    warnings = []
    for s in env.kinesis_streams:
        if s.capacity_mode == "provisioned" and s.shard_count < rec.kinesis_shards:
            warnings.append(
                f"{env.name}.kinesis_streams[{s.name}].shard_count: {s.shard_count} < {rec.kinesis_shards} "
                f"needed ({rec.kinesis_shards_by})"
            )
        if s.capacity_mode == "on_demand" and load.design_bytes_per_second > 200_000_000:
            warnings.append(f"{env.name}.kinesis_streams[{s.name}]: on-demand write limit is 200 MB/s per stream")
    def where(job) -> str:  # the block a job's settings come from
        return f"{env.name}.streaming_jobs[{env.streaming_jobs.index(job)}].streaming" if job.declared else f"{env.name}.streaming"

    checked = set()
    for job in env.job_groups:  # each job sized by its own block (the environment's for a source's own job)
        js, at = job.settings, where(job)
        if at in checked:
            continue
        checked.add(at)
        executor_cores = (js.max_workers - 1) * CORES_PER_WORKER[js.glue_version][js.worker_type]
        if executor_cores < rec.cores_needed:
            warnings.append(f"{at}.max_workers: {js.max_workers} x {js.worker_type} gives {executor_cores} executor "
                            f"cores < {rec.cores_needed} needed")
        if js.window_size_seconds > load.latency_seconds / 2:
            warnings.append(f"{at}.window_size_seconds: {js.window_size_seconds} exceeds half the latency target "
                            f"({load.latency_seconds:g} s)")
    if env.msk.enabled and env.msk.topic_partitions < rec.kafka_partitions:
        warnings.append(f"{env.name}.msk.topic_partitions: {env.msk.topic_partitions} < {rec.kafka_partitions} needed")
    for s in env.kinesis_streams:
        job = env.job_of(s.name)
        js, shards = job.settings, s.shard_count or rec.kinesis_shards
        per_batch = load.design_events_per_second * js.window_size_seconds
        if js.max_fetch_records_per_shard * shards < per_batch:
            warnings.append(
                f"{where(job)}.max_fetch_records_per_shard: {js.max_fetch_records_per_shard} x "
                f"{shards} shards < {math.ceil(per_batch)} records per window: the job can never catch up"
            )
    return warnings


def sized_streams(env, rec: Recommendation, stream: str | None, dataset: str | None, retention_hours: int | None
                  ) -> list[dict] | None:
    """The `kinesis_streams` list to paste: the environment's streams (when `env`), with `stream` sized as `rec` says
    (its dataset and retention kept unless given), or added when it is not there yet. None when no stream is named
    (the fragment then carries placeholders)."""
    if stream is None:
        return None
    current = [asdict(s) for s in env.kinesis_streams] if env else []
    old = next((s for s in current if s["name"] == stream), None)
    entry = {"name": stream, "dataset": dataset or (old or {}).get("dataset") or "<dataset: --dataset>",
             "capacity_mode": "provisioned", "shard_count": rec.kinesis_shards,
             "retention_hours": retention_hours or (old or {}).get("retention_hours") or 24}
    if old is not None and old.get("route") and dataset is None:  # a routed stream keeps its route
        entry = {**_as_config(old), "capacity_mode": "provisioned", "shard_count": rec.kinesis_shards,
                 "retention_hours": entry["retention_hours"]}
    listed = [entry if s["name"] == stream else _as_config(s) for s in current]
    return listed if old is not None else [*listed, entry]


def _as_config(stream: dict) -> dict:
    """A `kinesis_streams` entry as the config file spells it, from its dataclass's fields: a routed stream's `route`
    (field and {value: dataset}) in place of `dataset`."""
    entry = {k: stream[k] for k in ("name", "dataset", "capacity_mode", "shard_count", "retention_hours")}
    if stream.get("route"):
        del entry["dataset"]
        entry["route"] = {"field": stream["route"]["field"], "values": dict(stream["route"]["values"])}
    return entry


def dataset_shares(stream: str | None, rates: dict[str, float], env: EnvironmentConfig | None) -> list[str]:
    """The lines that state a routed stream's load per dataset (`--dataset-rate`): its rate is their sum. Refuses
    rates of a stream that carries one dataset, or of datasets other than its route's, naming the option."""
    if not rates:
        return []
    if stream is None:
        raise SizingError("--dataset-rate describes a routed stream's datasets: give --stream too (--source for a routed "
                          "MSK topic)")
    kind = "topic source" if env is not None and stream in env.msk.source_names else "stream"
    routed = env is not None and stream in env.routed
    carried = env.carried.get(stream, ()) if env is not None else ()
    if env is not None and not routed:
        raise SizingError(f"--dataset-rate: {kind} {stream!r} of environment {env.name!r} is not routed (it carries "
                          f"{', '.join(carried) or 'nothing yet'}); give --events-per-second")
    if routed and set(rates) != set(carried):
        raise SizingError(f"--dataset-rate names {', '.join(sorted(rates))}; {kind} {stream!r} routes to "
                          f"{', '.join(carried)}: give each of them once")
    total = sum(rates.values())
    return [f"routed {'topic' if kind == 'topic source' else 'stream'} {stream}: {total:g} records/s, the sum of its "
            "datasets'"] + [
        f"  {name:20} {rate:g} records/s ({rate / total:.0%})" for name, rate in sorted(rates.items())]


def parse_dataset_rates(texts: list[str]) -> dict[str, float]:
    """`--dataset-rate DATASET=RECORDS_PER_SECOND` values, each dataset once, each rate above 0."""
    rates: dict[str, float] = {}
    for text in texts:
        name, _, value = text.partition("=")
        try:
            rate = float(value)
        except ValueError:
            rate = float("nan")
        if not name or not rate > 0:
            raise SizingError(f"--dataset-rate {text!r} is not DATASET=RECORDS_PER_SECOND with a rate above 0")
        if name in rates:
            raise SizingError(f"--dataset-rate names {name!r} twice")
        rates[name] = rate
    return rates


def render_text(load: Load, rec: Recommendation, streams: list[dict] | None = None) -> str:
    lines = [
        f"load: {load.events_per_second:g} events/s x {load.record_kb:g} KB, latency target {load.latency_seconds:g} s, "
        f"{load.records_per_core_per_second:g} records/s per core, headroom {load.headroom:.0%}",
        f"  kinesis shards       {rec.kinesis_shards} (limited by {rec.kinesis_shards_by})",
        f"  kafka partitions     {rec.kafka_partitions}",
        f"  glue                 {rec.max_workers} x {rec.worker_type} max ({rec.cores_needed} executor cores needed)",
        f"  windowSize           {rec.window_size_seconds} s (expected batch {rec.expected_batch_seconds} s)",
        f"  maxFetchRecordsPerShard {rec.max_fetch_records_per_shard}, maxOffsetsPerTrigger {rec.max_offsets_per_trigger}",
        "  monthly cost (USD)   " + ", ".join(f"{k} {v:,.2f}" for k, v in rec.monthly_cost.items()),
        "config fragment" + (" (kinesis_streams is the environment's whole list: a list replaces, it does not merge)"
                             if streams is not None else
                             " (--stream and --dataset fill the placeholders; a kinesis_streams list replaces the "
                             "environment's whole list)") + ":",
        json.dumps(rec.config_fragment(streams), indent=2),
    ]
    lines += [f"WARNING {w}" for w in rec.warnings]
    return "\n".join(lines)


def render_iceberg(env: EnvironmentConfig, costs: list[IcebergDatasetCost], prices: dict) -> str:
    """What the Iceberg datasets `costs` add to `env` a month, by item, with the S3 Tables alternative beside it."""
    windows = sorted({env.job_of(source).settings.window_size_seconds for cost in costs for source in cost.streaming})
    window = f"{windows[0]} s" if len(windows) == 1 else "window (" + ", ".join(f"{w} s" for w in windows) + ")"
    lines = [f"{env.name}: what Iceberg adds, USD a month ({prices['region']}; one commit per {window} "
             f"window_size_seconds of the source's job, an upper bound; ESTIMATE where marked: devtools/sizing.py says why)"]
    total = 0.0
    for cost in costs:
        lines.append(f"  {cost.dataset}")
        for source, requests in cost.streaming.items():
            usd = round(requests.usd(prices), 2)
            total += usd  # of the figures shown, as environment_cost rounds its items
            lines += [f"    {'commits of ' + source:<32}{usd:9,.2f}",
                      f"      {cost.commits_per_month[source]:,.0f} commits: {requests.s3_put:,.0f} S3 PUT (metadata.json, "
                      f"manifest list, manifest); {requests.s3_get:,.0f} S3 GET (metadata; the duplicate check's "
                      f"manifests and files: ESTIMATE); {requests.glue_catalog:,.0f} Data Catalog requests (GetTable, "
                      f"UpdateTable: ESTIMATE; the account's free {GLUE_CATALOG_FREE_REQUESTS_PER_MONTH:,} a month not deducted)"]
        m = cost.maintenance
        requests_usd = round(m.usd(prices), 2)
        total += requests_usd + round(cost.maintenance_glue_usd, 2)
        lines += [f"    {'maintenance requests':<32}{requests_usd:9,.2f}",
                  f"      hourly: {m.s3_put:,.0f} S3 PUT, {m.s3_get:,.0f} GET, {m.s3_list:,.0f} LIST (orphan removal over "
                  f"~{cost.table_objects:,} objects: ESTIMATE), {m.glue_catalog:,.0f} Data Catalog requests",
                  f"    {'maintenance Glue time':<32}{cost.maintenance_glue_usd:9,.2f}",
                  f"      {MAINTENANCE_TO_COMPACTION_RATIO:g} x the compaction it replaces (the dataset's share of the hourly "
                  f"run, {cost.compaction_share_usd:,.2f}): measured on a 2-core machine, not on Glue: ESTIMATE",
                  "    S3 Tables instead of this maintenance (docs/iceberg.md \"When S3 Tables would replace this\"):",
                  f"      monitoring {cost.s3_tables_monitoring_usd:,.2f} (~{cost.table_objects:,} objects) + compaction "
                  f"{cost.s3_tables_compaction_objects_usd:,.2f} ({sum(cost.commits_per_month.values()):,.0f} files) + "
                  f"{S3_TABLES_COMPACTION_PER_GB} per GB compacted; storage {S3_TABLES_STORAGE_GB_MONTH} instead of "
                  f"{prices['s3']['standard_gb_month']} per GB-month"]
    lines.append(f"  {'total':<34}{total:+9,.2f}")
    return "\n".join(lines)


def iceberg_report(config, environments: list[str], datasets: list[str], prices: dict | None = None) -> str:
    """render_iceberg for each of `environments` (every configured one when empty) and the datasets named (those whose
    environment makes Iceberg when none are named: dataset.json or config `table_formats`); an environment none of
    whose sources carries them says so."""
    from glue_jobs import datasets as dataset_files

    p = prices or load_prices()
    unknown = sorted(set(datasets) - set(dataset_files.names()))
    if unknown:
        raise SizingError(f"--iceberg: {', '.join(unknown)} is not a dataset (datasets: {', '.join(dataset_files.names())})")
    declared = [name for name in dataset_files.names() if dataset_files.load(name).table_format == "iceberg"]
    parts = []
    for name in environments or list(config.environments):
        env = config.get(name)
        named = datasets or iceberg_in(env, declared)  # none named: those Iceberg in this environment
        carried = [d for d in named if d in env.datasets]
        if not carried:
            parts.append(f"{name}: no source carries {', '.join(named)}" if named else
                         f"{name}: no dataset is Iceberg here (dataset.json `table_format`, config `table_formats`); "
                         "name one to price it: --iceberg orders")
            continue
        parts.append(render_iceberg(env, [iceberg_dataset_cost(env, d, p) for d in carried], p))
    return "\n".join(parts)


def _measured_rate() -> float | None:
    if BENCH_RESULT_PATH.exists():
        data = json.loads(BENCH_RESULT_PATH.read_text())
        return data.get("streaming", {}).get("runner_records_per_second_per_core")
    return None


EPILOG = exit_codes(ok="0 the recommendation (and, with --environment, its config holds the load)",
                    failed="1 with --environment: its config under-provisions the load (the warnings say where)",
                    usage="2 usage error: a missing or bad option, a load no configuration can carry, a bad config")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = Parser(prog=prog or "python -m devtools.sizing", description=__doc__.splitlines()[0], epilog=EPILOG)
    parser.add_argument("--events-per-second", type=float, help="records per second the sources receive at peak")
    parser.add_argument("--record-kb", type=float, help="average record size in KB (1 KB = 1000 bytes)")
    parser.add_argument("--latency-seconds", type=float, help="end-to-end latency target")
    parser.add_argument("--records-per-core-per-second", type=float,
                        help="measured throughput of the job per core (default: bench-output/bench.json from `make bench`)")
    parser.add_argument("--headroom", type=float, default=DEFAULT_HEADROOM, help="extra capacity fraction (default 0.3)")
    parser.add_argument("--glue-version", choices=sorted(CORES_PER_WORKER), default="4.0",
                        help="Glue version whose workers to size (default 4.0; with --environment, its own)")
    parser.add_argument("--environment", help="also check this environment's config against the load")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--stream", help="the Kinesis stream the load is for: the config fragment then carries its entry "
                                         "whole (with --environment, the environment's whole kinesis_streams list)")
    parser.add_argument("--source", help="a routed MSK topic's source the load is for (with --dataset-rate and "
                                         "--environment): each dataset's share is printed; the topic's partitions are "
                                         "the recommendation's kafka partitions")
    parser.add_argument("--dataset", help="the dataset that stream carries (kept from the environment's config when the "
                                          "stream is there)")
    parser.add_argument("--dataset-rate", action="append", default=[], metavar="DATASET=RECORDS_PER_SECOND",
                        help="a routed stream's load per dataset (repeat per dataset its route names): the stream's "
                             "rate is their sum, instead of --events-per-second, and each dataset's share is printed")
    parser.add_argument("--retention-hours", type=int, default=None,
                        help="the stream's retention in the fragment (default: the environment's for that stream, else "
                             "24, Kinesis' minimum)")
    parser.add_argument("--group", action="append", metavar="NAME:RECORDS_PER_SECOND:RECORD_KB",
                        help="instead: propose which datasets share a streaming job, from each one's load (repeat per "
                             "dataset), with the monthly cost per job and per dataset beside one job each and Firehose")
    parser.add_argument("--window-seconds", type=int, default=60, help="the window of the proposed jobs (default 60)")
    parser.add_argument("--iceberg", nargs="*", metavar="DATASET",
                        help="instead: what these datasets add as Iceberg tables (default: those whose dataset.json says "
                             "iceberg), in --environment or in every environment; no load arguments needed")
    args = parser.parse_args(argv)
    # what the fragment carries must be what the config accepts (infra/config/sections.py: retention 24-8760 hours, a
    # dataset folder under datasets/): refused here, not at the next synth
    if args.retention_hours is not None and not 24 <= args.retention_hours <= 8760:
        parser.error(f"--retention-hours {args.retention_hours}: a Kinesis stream keeps records 24 to 8760 hours")
    if args.dataset is not None:
        from glue_jobs import datasets

        if args.dataset not in datasets.names():
            parser.error(f"--dataset {args.dataset!r} is not a dataset (datasets/: {', '.join(datasets.names())})")
    if args.source is not None and (args.stream is not None or not args.dataset_rate or not args.environment):
        parser.error("--source names a routed MSK topic's source: give it with --dataset-rate and --environment, "
                     "without --stream")
    if (args.dataset or args.retention_hours) and not args.stream:
        parser.error("--dataset and --retention-hours describe the stream --stream names; give --stream too")
    if args.group:
        from devtools import job_grouping

        try:
            loads = [job_grouping.parse_group(text) for text in args.group]
            if not 1 <= args.window_seconds <= 3600:
                raise SizingError(f"--window-seconds {args.window_seconds}: a window is 1 to 3600 seconds")
            result = job_grouping.report(loads, job_grouping.propose(loads, window_seconds=args.window_seconds,
                                                                     glue_version=args.glue_version))
        except SizingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(result, indent=2) if args.json else job_grouping.render(result))
        return 0
    if args.iceberg is not None:
        try:
            print(iceberg_report(load_config(), [args.environment] if args.environment else [], args.iceberg))
        except (SizingError, ConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        rates = parse_dataset_rates(args.dataset_rate)
    except SizingError as exc:
        parser.error(str(exc))
    if rates and args.events_per_second is not None:
        parser.error("--events-per-second and --dataset-rate: give one (a routed stream's rate is its datasets' sum)")
    if rates:
        args.events_per_second = sum(rates.values())
    missing = [f"--{name.replace('_', '-')}" for name in ("events_per_second", "record_kb", "latency_seconds")
               if getattr(args, name) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    rate = args.records_per_core_per_second or _measured_rate()
    if rate is None:
        parser.error("--records-per-core-per-second is required (or run `make bench` to measure it)")
    try:
        load = Load(args.events_per_second, args.record_kb, args.latency_seconds, rate, args.headroom)
        env = load_config().get(args.environment) if args.environment else None
        if env:
            # the fragment must be one the environment's validation accepts (no G.025X in prod)
            rec = recommend(load, glue_version=env.streaming.glue_version, worker_types=streaming_worker_types(env.name))
            rec.warnings = check_environment(env, load, rec)
        else:
            rec = recommend(load, glue_version=args.glue_version)
        shares = dataset_shares(args.stream or args.source, rates, env)
    except (SizingError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    streams = sized_streams(env, rec, args.stream, args.dataset, args.retention_hours)
    if args.json:
        print(json.dumps({**asdict(rec), **({"dataset_rates": rates} if rates else {})}, indent=2))
    else:
        print("\n".join([*shares, render_text(load, rec, streams)]))
    return 1 if rec.warnings else 0


if __name__ == "__main__":
    sys.exit(main())
