"""Which datasets' sources share a streaming job: a proposal from each dataset's rate and record size, with the
monthly cost per job and per dataset, next to one job per dataset and the Amazon Data Firehose reference.

    streamlake sizing --group clicks:50:1 --group orders:20:2 ... [--window-seconds 60] [--json]

The model (each figure below says where it comes from):
- A source's micro-batch takes FIXED_SECONDS_PER_BATCH whatever its size (the job's planning, commit markers,
  publishing), plus its records at RECORDS_PER_CORE_PER_SECOND on each executor core of the job. Both were measured
  on a 2-core local machine, not on Glue.
- A job's sources run side by side (glue_jobs/sources/source_queries.py), but on a small job the driver does most of a small
  batch's work for all of them, so the proposal adds their batch times up, as if one ran after another, and keeps the
  sum within UTILIZATION of the window: the rest is room to catch up after an outage.
- Sources are packed first-fit, largest first, into jobs of the smallest worker (G.025X) at MIN_STREAMING_WORKERS
  workers, at most MAX_SOURCES_PER_JOB a job. A dataset that does not fit such a job alone gets a job of its own,
  sized by `recommend` (devtools/sizing.py).
- A job's cost is its workers around the clock (config/prices.json); a shared job's cost is split between its datasets
  by their share of its batch time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from devtools.sizing import CORES_PER_WORKER, MIN_STREAMING_WORKERS, Load, SizingError, load_prices, recommend

# Measured on the reference machine (2 cores, nothing else running), not on Glue:
# - the deployed job's batch of 4,000 clickstream records run through AWS's forEachBatch by the deploy rehearsal, make
#   bench's (c) row at 7081ada, 2026-11-28 (docs/performance.md "make bench at 7081ada"): 1.485 s;
FIXED_SECONDS_PER_BATCH = 1.485
# - the streaming runner's warm throughput, the lowest of four make bench runs, 2026-11-25 (docs/performance.md,
#   "The sizing table (README) came out the same at measured rates of ..."): records per second per core.
RECORDS_PER_CORE_PER_SECOND = 67_586
MEASURED = "2026-11-28, a 2-core local machine, not Glue"
UTILIZATION = 0.5
# Two sources side by side are measured (bench/bench_isolation.py); eight are what make bench is to measure next:
# more than that in one job is not proposed (unverified).
MAX_SOURCES_PER_JOB = 8
SMALL_WORKER = "G.025X"
# Amazon Data Firehose delivering to Apache Iceberg tables: "billed per GB ingested with no 5KB increments", $0.075 per
# GB for the first 250 TB a month in us-east-1. Unverified: read in a blog post quoting the pricing page
# (aws.amazon.com/firehose/pricing), not on the page itself.
FIREHOSE_ICEBERG_GB = 0.075


@dataclass(frozen=True)
class DatasetLoad:
    name: str
    records_per_second: float
    record_kb: float

    def __post_init__(self) -> None:
        if not self.name or not 0 < self.records_per_second <= 10_000_000 or not 0 < self.record_kb <= 1024:
            raise SizingError(f"{self.name or '(no name)'}: records/s must be in (0, 10,000,000] and record KB in (0, 1024]")

    def gb_month(self, hours: float) -> float:
        return self.records_per_second * 3600 * hours * self.record_kb / 1e6

    def batch_seconds(self, window_seconds: int, cores: int) -> float:
        return FIXED_SECONDS_PER_BATCH + self.records_per_second * window_seconds / (RECORDS_PER_CORE_PER_SECOND * cores)


@dataclass
class ProposedJob:
    name: str
    datasets: list[str]
    worker_type: str
    workers: int
    window_seconds: int
    batch_seconds: float  # the sum of its sources' batch times per window
    monthly_usd: float
    shares_usd: dict[str, float] = field(default_factory=dict)


def job_cost(worker_type: str, workers: int, prices: dict) -> float:
    glue = prices["glue"]
    return workers * glue["dpu_per_worker"][worker_type] * prices["hours_per_month"] * glue["dpu_hour"]


def propose(loads: list[DatasetLoad], *, window_seconds: int = 60, glue_version: str = "4.0",
            prices: dict | None = None) -> list[ProposedJob]:
    """The proposed jobs (see the module doc)."""
    prices = prices or load_prices()
    names = [load.name for load in loads]
    if len(set(names)) != len(names):
        raise SizingError(f"a dataset named twice: {sorted({n for n in names if names.count(n) > 1})}")
    cores = CORES_PER_WORKER[glue_version][SMALL_WORKER] * (MIN_STREAMING_WORKERS - 1)  # one worker is the driver
    budget = window_seconds * UTILIZATION
    small: list[tuple[DatasetLoad, float]] = []
    jobs: list[ProposedJob] = []
    for load in sorted(loads, key=lambda d: -d.batch_seconds(window_seconds, cores)):
        seconds = load.batch_seconds(window_seconds, cores)
        if seconds <= budget:
            small.append((load, seconds))
            continue
        rec = recommend(Load(load.records_per_second, load.record_kb, max(2, window_seconds * 2),
                             RECORDS_PER_CORE_PER_SECOND, 0.0), glue_version=glue_version)
        jobs.append(ProposedJob(load.name, [load.name], rec.worker_type, rec.max_workers, rec.window_size_seconds,
                                round(rec.expected_batch_seconds, 2), round(job_cost(rec.worker_type, rec.max_workers, prices), 2),
                                {load.name: round(job_cost(rec.worker_type, rec.max_workers, prices), 2)}))
    bins: list[list[tuple[DatasetLoad, float]]] = []
    for load, seconds in small:  # first fit, largest first
        for members in bins:
            if len(members) < MAX_SOURCES_PER_JOB and sum(s for _, s in members) + seconds <= budget:
                members.append((load, seconds))
                break
        else:
            bins.append([(load, seconds)])
    cost = job_cost(SMALL_WORKER, MIN_STREAMING_WORKERS, prices)
    for index, members in enumerate(bins, start=1):
        total = sum(s for _, s in members)
        jobs.append(ProposedJob(f"shared-{index}" if len(members) > 1 else members[0][0].name,
                                [load.name for load, _ in members], SMALL_WORKER, MIN_STREAMING_WORKERS, window_seconds,
                                round(total, 2), round(cost, 2),
                                {load.name: round(cost * seconds / total, 2) for load, seconds in members}))
    return jobs


def report(loads: list[DatasetLoad], jobs: list[ProposedJob], prices: dict | None = None) -> dict:
    """Per dataset: GB a month, one job each, its share of the proposed grouping, and the Firehose reference."""
    prices = prices or load_prices()
    hours = prices["hours_per_month"]
    alone = job_cost(SMALL_WORKER, MIN_STREAMING_WORKERS, prices)
    job_of = {name: job for job in jobs for name in job.datasets}
    rows = []
    for load in loads:
        job = job_of[load.name]
        own = alone if len(job.datasets) > 1 or job.worker_type == SMALL_WORKER else job.monthly_usd
        rows.append({"dataset": load.name, "records_per_second": load.records_per_second, "record_kb": load.record_kb,
                     "gb_month": round(load.gb_month(hours), 1), "one_job_each_usd": round(own, 2), "job": job.name,
                     "grouped_usd": job.shares_usd[load.name],
                     "firehose_usd": round(load.gb_month(hours) * FIREHOSE_ICEBERG_GB, 2)})
    return {"measured": MEASURED, "fixed_seconds_per_batch": FIXED_SECONDS_PER_BATCH,
            "records_per_core_per_second": RECORDS_PER_CORE_PER_SECOND, "prices": f"{prices['region']}, {prices['as_of']}",
            "rows": rows, "jobs": [asdict(job) for job in jobs],
            "totals": {key: round(sum(r[key] for r in rows), 2) for key in ("gb_month", "one_job_each_usd", "grouped_usd", "firehose_usd")}}


def render(result: dict) -> str:
    lines = ["| dataset | records/s | record KB | GB a month | one job each (USD/month) | proposed job | grouped (USD/month) "
             "| Firehose to Iceberg (USD/month) |", "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['dataset']} | {r['records_per_second']:g} | {r['record_kb']:g} | {r['gb_month']:,.1f} | "
                     f"{r['one_job_each_usd']:,.2f} | {r['job']} | {r['grouped_usd']:,.2f} | {r['firehose_usd']:,.2f} |")
    t = result["totals"]
    lines.append(f"| **total** | | | {t['gb_month']:,.1f} | {t['one_job_each_usd']:,.2f} | {len(result['jobs'])} job(s) | "
                 f"{t['grouped_usd']:,.2f} | {t['firehose_usd']:,.2f} |")
    lines.append("")
    for job in result["jobs"]:
        lines.append(f"- {job['name']}: {', '.join(job['datasets'])} on {job['workers']} x {job['worker_type']}, window "
                     f"{job['window_seconds']} s, {job['batch_seconds']:.1f} s of batches a window, "
                     f"{job['monthly_usd']:,.2f} USD a month")
    lines += ["", f"Batch time per source per window: {result['fixed_seconds_per_batch']} s plus its records at "
              f"{result['records_per_core_per_second']:,} records/s per core (measured {result['measured']}); at most "
              f"{int(UTILIZATION * 100)}% of the window, at most {MAX_SOURCES_PER_JOB} sources a job. Glue prices: "
              f"config/prices.json ({result['prices']}); a streaming job from {MIN_STREAMING_WORKERS} workers (the "
              "fewest an auto-scaled run is billed for: unverified). Firehose: $0.075 per GB ingested to Iceberg "
              "tables, us-east-1 (unverified: quoted from the pricing page by a third party)."]
    return "\n".join(lines)


def parse_group(text: str) -> DatasetLoad:
    """`name:records_per_second:record_kb`, e.g. `clicks:50:1`."""
    parts = text.split(":")
    if len(parts) != 3:
        raise SizingError(f"--group {text!r}: expected NAME:RECORDS_PER_SECOND:RECORD_KB, e.g. clicks:50:1")
    try:
        return DatasetLoad(parts[0], float(parts[1]), float(parts[2]))
    except ValueError:
        raise SizingError(f"--group {text!r}: records per second and record KB must be numbers") from None

