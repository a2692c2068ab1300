"""Capacity planning: from a stated load to shards, partitions, Glue workers, window and cost.

    python -m devtools.sizing --events-per-second 10000 --record-kb 1 --latency-seconds 120 \\
        --records-per-core-per-second 25000 [--environment prod] [--json]

The recommendation can be pasted into config/environments.json; with --environment it keeps to the worker
types that environment allows (no G.025X in prod), and the command also checks that environment's config
against the load and warns where it under-provisions.
Every rule is written out below with the AWS limit it comes from. Prices: config/prices.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
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

    def config_fragment(self) -> dict:
        """The part of an environment block in config/environments.json this recommends."""
        return {
            "kinesis_streams": [{"capacity_mode": "provisioned", "shard_count": self.kinesis_shards}],
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


def environment_cost(env: EnvironmentConfig, prices: dict | None = None, *, compaction_minutes: float = 5.0,
                     streaming_workers: str = "max") -> dict[str, float]:
    """Fixed monthly capacity cost of an environment's config (usage not included).

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
    workers = env.streaming.max_workers
    if streaming_workers == "min":
        workers = min(workers, MIN_STREAMING_WORKERS)
    for source in env.source_names:
        cost[f"glue_streaming:{source}"] = workers * dpu[env.streaming.worker_type] * hours * g["dpu_hour"]
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
    cores = CORES_PER_WORKER[env.streaming.glue_version]
    executor_cores = (env.streaming.max_workers - 1) * cores[env.streaming.worker_type]
    if executor_cores < rec.cores_needed:
        warnings.append(
            f"{env.name}.streaming.max_workers: {env.streaming.max_workers} x {env.streaming.worker_type} gives "
            f"{executor_cores} executor cores < {rec.cores_needed} needed"
        )
    if env.streaming.window_size_seconds > load.latency_seconds / 2:
        warnings.append(
            f"{env.name}.streaming.window_size_seconds: {env.streaming.window_size_seconds} exceeds half the "
            f"latency target ({load.latency_seconds:g} s)"
        )
    if env.msk.enabled and env.msk.topic_partitions < rec.kafka_partitions:
        warnings.append(f"{env.name}.msk.topic_partitions: {env.msk.topic_partitions} < {rec.kafka_partitions} needed")
    per_batch = load.design_events_per_second * env.streaming.window_size_seconds
    for s in env.kinesis_streams:
        shards = s.shard_count or rec.kinesis_shards
        if env.streaming.max_fetch_records_per_shard * shards < per_batch:
            warnings.append(
                f"{env.name}.streaming.max_fetch_records_per_shard: {env.streaming.max_fetch_records_per_shard} x "
                f"{shards} shards < {math.ceil(per_batch)} records per window: the job can never catch up"
            )
    return warnings


def render_text(load: Load, rec: Recommendation) -> str:
    lines = [
        f"load: {load.events_per_second:g} events/s x {load.record_kb:g} KB, latency target {load.latency_seconds:g} s, "
        f"{load.records_per_core_per_second:g} records/s per core, headroom {load.headroom:.0%}",
        f"  kinesis shards       {rec.kinesis_shards} (limited by {rec.kinesis_shards_by})",
        f"  kafka partitions     {rec.kafka_partitions}",
        f"  glue                 {rec.max_workers} x {rec.worker_type} max ({rec.cores_needed} executor cores needed)",
        f"  windowSize           {rec.window_size_seconds} s (expected batch {rec.expected_batch_seconds} s)",
        f"  maxFetchRecordsPerShard {rec.max_fetch_records_per_shard}, maxOffsetsPerTrigger {rec.max_offsets_per_trigger}",
        "  monthly cost (USD)   " + ", ".join(f"{k} {v:,.2f}" for k, v in rec.monthly_cost.items()),
        "config fragment:",
        json.dumps(rec.config_fragment(), indent=2),
    ]
    lines += [f"WARNING {w}" for w in rec.warnings]
    return "\n".join(lines)


def _measured_rate() -> float | None:
    if BENCH_RESULT_PATH.exists():
        data = json.loads(BENCH_RESULT_PATH.read_text())
        return data.get("streaming", {}).get("runner_records_per_second_per_core")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.sizing", description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-second", type=float, required=True)
    parser.add_argument("--record-kb", type=float, required=True, help="average record size in KB (1 KB = 1000 bytes)")
    parser.add_argument("--latency-seconds", type=float, required=True, help="end-to-end latency target")
    parser.add_argument("--records-per-core-per-second", type=float,
                        help="measured throughput of the job per core (default: bench-output/bench.json from `make bench`)")
    parser.add_argument("--headroom", type=float, default=DEFAULT_HEADROOM, help="extra capacity fraction (default 0.3)")
    parser.add_argument("--glue-version", choices=sorted(CORES_PER_WORKER), default="4.0")
    parser.add_argument("--environment", help="also check this environment's config against the load")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
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
    except (SizingError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(rec), indent=2) if args.json else render_text(load, rec))
    return 1 if rec.warnings else 0


if __name__ == "__main__":
    sys.exit(main())
