"""The micro-batch function of a routed source: one stream, several datasets (glue_jobs/decoding/routes.py says how a
record finds its dataset).

A routed source is one query with one checkpoint. Each batch is split by route, and each dataset's part goes through
that dataset's own `MicroBatchWriter` (glue_jobs/batch.py: contract, lake, dead letters, exactly-once), whose commit
markers live in the dataset's folder of the source's checkpoint, `<checkpoint>/_routes/<dataset>/_streamlake/`; the
records no route takes are written by `UnroutableWriter`, to the source's own dead-letter folder, with their own
markers in `<checkpoint>/_routes/_unroutable/`. File names carry the query id from `<checkpoint>/metadata` as a
single-dataset source's do.

Exactly once, per source: Spark commits the batch's offsets after the function returns, so a crash anywhere in it
replays the whole batch with the same records. The same payloads route the same way, each part whose marker is
written is skipped (its recorded counts are returned) and each other part is written from scratch, so every record is
written once, in its dataset or as an unroutable dead letter. The crash point `after_route` (a dataset's part
committed, the next not started) is where the kill tests stop it.

A route table that changes between a crash and the replay (a dataset joined the stream, a value moved) must not route
the replayed batch anew: a part already committed holds the records the old table gave it, and the new one could
give some of them to another part too. So the table each batch is routed with is recorded when it changes
(`RouteLog`, `<checkpoint>/_routes/_tables/`, one small file per change, nothing per batch otherwise), and a batch
one of whose parts is already committed is routed again with the table recorded for it; a batch none of whose parts
committed takes the current table.

Counts reconcile per source: the records in = the sum over the datasets' records in + the unroutable ones, each part
reconciling as a single-dataset batch does (records in = written + dead letters + duplicates collapsed). The batch
function returns one BatchStats per dataset and one for the unroutable part (dataset ""), each emitted to the metrics
sink under the source's name, so the source's dead-letter share sums over all of them.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from pyspark import StorageLevel, inheritable_thread_target
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from glue_jobs.batch import SHUFFLE_PARTITIONS, STAGING_WRITE_OPTIONS, MicroBatchWriter, write_tasks
from glue_jobs.commit import BatchCommit, BatchStats, crash_points
from glue_jobs.commit.ownership import claim
from glue_jobs.contract import REASON_CODES
from glue_jobs.datasets import load as load_dataset
from glue_jobs.decoding.routes import UNROUTABLE, RouteError, RouteTable
from glue_jobs.lake.iceberg_lake import APPEND_SETTINGS, IcebergTarget
from glue_jobs.lake.lake_layout import dead_letter_write_columns
from glue_jobs.lake.packed_batch import CACHE_SETTINGS
from glue_jobs.lake.storage import HadoopStorage
from glue_jobs.lake.unwritable import stops_seen
from glue_jobs.metrics import MetricsSink, NoOpMetricsSink
from glue_jobs.observed import observed as observed_values
from glue_jobs.observed import row_count
from glue_jobs.session import session_conf

log = logging.getLogger("glue_jobs.routed_batch")

ROUTES_DIR = "_routes"
UNROUTABLE_PART = "_unroutable"
TABLES_PART = "_tables"
ROUTE, DETAIL = "_route", "_route_detail"
# Dead-letter columns a source's envelope gives (the rest: reason, detail).
_CARRIED = ("payload", "source", "source_partition", "source_offset", "arrival_time")
# Reasons an unroutable dead letter may have: unroutable, or the adapter's own verdict (glue_jobs.contract).
_REASONS = (UNROUTABLE, *REASON_CODES)


@dataclass(frozen=True)
class DatasetTarget:
    """Where one dataset of a routed source writes: its lake, its dead letters, its Iceberg table if it has one."""

    lake_path: str
    dead_letter_path: str
    iceberg: IcebergTarget | None = None


class RouteLog:
    """The route table each batch was routed with, recorded when it changes: `<folder>/batch-<id>.json` holds the
    table batches from <id> on were routed with, until the next record. Read whole when the writer starts (a record
    cut off by a crash is left out: it was written before any part of its batch, which then committed nothing)."""

    def __init__(self, storage: HadoopStorage, folder: str, kind: type = RouteTable) -> None:
        """`kind`: the tables' class (RouteTable, or decoding/schema_routes.SchemaRoutes), with to_record/from_record."""
        self.storage, self.folder = storage, folder.rstrip("/")
        self.recorded: dict[int, RouteTable] = {}
        for info in storage.list(self.folder, files_only=True, suffix=".json"):
            match = re.fullmatch(r"batch-(\d+)\.json", info.name)
            if match is None:
                continue
            try:
                self.recorded[int(match.group(1))] = kind.from_record(json.loads(storage.read_text(info.path)))
            except (ValueError, KeyError, TypeError) as error:
                log.warning("route table record %s is not whole (%s): left out", info.path, error)

    def recorded_for(self, batch_id: int) -> RouteTable | None:
        """The table recorded for `batch_id`: the newest record at or before it."""
        before = [recorded for recorded in self.recorded if recorded <= batch_id]
        return self.recorded[max(before)] if before else None

    def record(self, batch_id: int, routes: RouteTable) -> None:
        text = json.dumps(routes.to_record(), sort_keys=True)
        self.storage.write_text(f"{self.folder}/batch-{batch_id:010d}.json", text + "\n")
        self.recorded[batch_id] = routes


class JsonRouter:
    """A routed JSON source (Kinesis, local files): the envelope is routed by the table's field
    (glue_jobs/decoding/routes.py); each part is the dataset's envelope as it is. Every router offers `kind` (its
    tables' class), `route(frame, routes) -> (routed frame with ROUTE, frame to unpersist after the batch)`,
    `part(frame, dataset) -> (envelope, redecode or None)` and `unroutable(frame, routes)`: the envelope with DETAIL."""

    kind = RouteTable

    def route(self, envelope: DataFrame, routes: RouteTable) -> tuple[DataFrame, DataFrame]:
        # A record the adapter already judged has no payload to route (its problem says why).
        routed = envelope.withColumn(ROUTE, F.when(F.col("problem").isNull(), routes.dataset())) \
            .persist(StorageLevel.MEMORY_AND_DISK_DESER)
        return routed, routed

    def part(self, frame: DataFrame, dataset: str):
        return frame, None

    def unroutable(self, frame: DataFrame, routes: RouteTable) -> DataFrame:
        return frame.withColumn(DETAIL, routes.detail())


class UnroutableWriter:
    """A routed source's unroutable records as its own dead letters, exactly once (the protocol of glue_jobs/commit,
    without a lake). A record the adapter already judged (its `problem`, such as a line that is not UTF-8) keeps that
    reason; the others are `unroutable` with the route table's detail."""

    def __init__(self, storage: HadoopStorage, *, source_name: str, dead_letter_path: str,
                 checkpoint_path: str, metrics: MetricsSink, clock: Callable[[], float], stream_id: str | None = None) -> None:
        claim(storage, dead_letter_path, "dead-letter folder", {"source": source_name})
        own = f"{checkpoint_path.rstrip('/')}/{ROUTES_DIR}/{UNROUTABLE_PART}"
        claim(storage, own, "checkpoint", {"source": source_name, "datasets": []})
        self.commit = BatchCommit(storage, source_name=source_name, lake_path=None, dead_letter_path=dead_letter_path,
                                  checkpoint_path=own, query_checkpoint=checkpoint_path,
                                  stream_id=stream_id)
        self.source_name, self.metrics, self.clock = source_name, metrics, clock

    def __call__(self, unrouted: DataFrame, batch_id: int, frame_anomalies: int = 0) -> BatchStats:
        """`unrouted`: the envelope's columns and DETAIL, why the router took no route (a router's `unroutable`);
        `frame_anomalies`: the source frame's, counted with this part (it runs in every batch)."""
        started = self.clock()
        recorded = self.commit.committed_stats(batch_id)
        if recorded is not None:
            return replace(recorded, replayed=True)
        self.commit.discard_partial(batch_id)
        rows = unrouted.select(*_CARRIED, F.coalesce(F.col("problem.reason"), F.lit(UNROUTABLE)).alias("reason"),
                               F.coalesce(F.col("problem.detail"), F.col(DETAIL)).alias("detail"))
        observed = Observation()
        dead = dead_letter_write_columns(rows, batch_id=batch_id, processing_date=time.strftime("%Y-%m-%d", time.gmtime(started)))
        # The reasons are counted as the rows are written: one pass over the part, one file per ingest date.
        dead.observe(observed, row_count(), *[F.sum(F.when(F.col("reason") == reason, 1).otherwise(0)).alias(reason)
                                              for reason in _REASONS]) \
            .coalesce(1).write.options(**STAGING_WRITE_OPTIONS, compression="snappy") \
            .partitionBy("ingest_date").parquet(self.commit.dead_letter_staging(batch_id))
        values = observed_values(observed, "rows", *_REASONS)
        written = int(values["rows"])
        by_reason = {reason: int(values[reason]) for reason in _REASONS if values[reason]}
        if sum(by_reason.values()) != written:  # an adapter's reason this module does not know: counted, never lost
            raise AssertionError(f"batch {batch_id} of {self.source_name}: {written} unroutable dead letter(s), by reason {by_reason}")
        files = self.commit.publish(batch_id) if written else []
        stats = BatchStats(source=self.source_name, batch_id=batch_id, records_in=written, records_written=0,
                           dead_letters=written, duplicates_collapsed=0, dead_letters_by_reason=by_reason,
                           duration_ms=int((self.clock() - started) * 1000), files_written=len(files), dataset="",
                           frame_anomalies=frame_anomalies)
        self.commit.mark_committed(stats)
        self.metrics.emit(stats)
        return stats


class RoutedWriter:
    """Callable as `(envelope_frame, batch_id) -> [BatchStats]`: one per dataset of the route table, in its order,
    then the unroutable part's."""

    def __init__(self, spark, *, source_name: str, routes, targets: dict[str, DatasetTarget],
                 dead_letter_path: str, checkpoint_path: str, metrics: MetricsSink | None = None,
                 clock: Callable[[], float] = time.time, count_replacements: bool = False,
                 stream_id: str | None = None, router=None) -> None:
        """`routes`: a RouteTable (`router` None: a JSON source) or the table of `router` (glue_jobs/kafka_job.py
        KafkaRouter: SchemaRoutes); `targets`: each dataset of `routes`, by name; `dead_letter_path`: the source's own
        dead letters (unroutable records); `checkpoint_path`: the query's Spark checkpoint."""
        self.router = router or JsonRouter()
        if not isinstance(routes, self.router.kind):
            raise RouteError(f"source {source_name}: {type(self.router).__name__} routes by a {self.router.kind.__name__}, "
                             f"not a {type(routes).__name__}")
        if set(targets) != set(routes.datasets):
            raise RouteError(f"source {source_name}: routes name datasets {list(routes.datasets)}, targets are {sorted(targets)}")
        datasets = {name: load_dataset(name) for name in routes.datasets}
        problems = routes.problems(datasets)
        if problems:
            raise RouteError(f"source {source_name}: " + "; ".join(problems))
        storage = HadoopStorage(spark)
        checkpoint_path = checkpoint_path.rstrip("/")
        # Not the datasets: a dataset joins a routed source by config, on the same checkpoint (its own part's folder).
        claim(storage, checkpoint_path, "checkpoint", {"source": source_name, "routed_by": routes.field})
        self.metrics = metrics or NoOpMetricsSink()
        self.writers = {name: MicroBatchWriter(
            spark, source_name=source_name, lake_path=target.lake_path, dead_letter_path=target.dead_letter_path,
            checkpoint_path=f"{checkpoint_path}/{ROUTES_DIR}/{name}", query_checkpoint=checkpoint_path,
            metrics=self.metrics, clock=clock, dataset=datasets[name], iceberg=target.iceberg,
            count_replacements=count_replacements, stream_id=stream_id) for name, target in sorted(targets.items())}
        self.unroutable = UnroutableWriter(storage, source_name=source_name, dead_letter_path=dead_letter_path,
                                           checkpoint_path=checkpoint_path, metrics=self.metrics, clock=clock,
                                           stream_id=stream_id)
        self.route_log = RouteLog(storage, f"{checkpoint_path}/{ROUTES_DIR}/{TABLES_PART}", self.router.kind)
        self.spark, self.routes, self.source_name = spark, routes, source_name
        # Every SQL setting a part's writer sets for a while (glue_jobs/batch.py, lake/packed_batch.py, lake/iceberg_lake.py),
        # set for the whole batch: the parts share the batch's session, and session_conf restores a key to what it found
        # when its block ends, which would otherwise be unset under a part still planning or writing.
        self.part_settings = {SHUFFLE_PARTITIONS: str(write_tasks(spark)), **CACHE_SETTINGS,
                              **(APPEND_SETTINGS if any(t.iceberg is not None for t in targets.values()) else {})}

    @classmethod
    def under(cls, spark, *, source_name: str, routes: RouteTable, lake_root: str, dead_letter_root: str, checkpoint_path: str,
              icebergs: dict[str, IcebergTarget | None], metrics: MetricsSink | None = None, router=None) -> RoutedWriter:
        """The writer with each dataset's lake and dead letters in the folder named after it under `lake_root` and
        `dead_letter_root`, and the unroutable records in `dead_letter_root`/unroutable (the local runner's layout)."""
        targets = {name: DatasetTarget(f"{lake_root}/{name}", f"{dead_letter_root}/{name}", icebergs.get(name))
                   for name in routes.datasets}
        return cls(spark, source_name=source_name, routes=routes, targets=targets, dead_letter_path=f"{dead_letter_root}/{UNROUTABLE}",
                   checkpoint_path=checkpoint_path, metrics=metrics, router=router)

    def routes_for(self, batch_id: int):
        """The table to route `batch_id` with (the module doc): the writer's own, recorded when it is new, unless the
        batch is partly committed under another recorded table. Only a changed table costs a look at the markers."""
        recorded = self.route_log.recorded_for(batch_id)
        if recorded == self.routes:
            return self.routes
        commits = [writer.commit for writer in self.writers.values()] + [self.unroutable.commit]
        if recorded is not None and any(commit.committed_stats(batch_id) is not None for commit in commits):
            gone = sorted(set(recorded.datasets) - set(self.writers))
            if gone:
                raise RouteError(f"source {self.source_name}: batch {batch_id} is partly committed, routed to {gone} too, "
                                 f"which the source no longer routes to: route to them again until that batch commits")
            log.warning("batch %s of %s is partly committed under an earlier route table: it is routed with that one",
                        batch_id, self.source_name)
            return recorded
        self.route_log.record(batch_id, self.routes)
        return self.routes

    def __call__(self, frame: DataFrame, batch_id: int, frame_anomalies: int = 0) -> list[BatchStats]:
        """The parts run at once, each in a thread of its own (pyspark's inheritable_thread_target, so each keeps the
        batch thread's scheduler pool): a part's Spark jobs use the cores and driver time another's leave idle, as the
        queries of a shared job do (glue_jobs/sources/source_queries.py). The SQL settings the parts' writers set are set
        here first, for the whole batch (`part_settings`): a part that ends restores each to this value, never unsets
        it under a part still planning. Every part runs even when no record routes to it (an empty part costs its
        writer's count, and the unroutable part a write job, per batch). A part's failure is raised once every part is done (the replay redoes only the parts without a
        marker)."""
        with stops_seen(int(batch_id), self.source_name):  # a stop's error, from any part, leaves as QueryStopped
            return self._parts(frame, int(batch_id), frame_anomalies)

    def _parts(self, frame: DataFrame, batch_id: int, frame_anomalies: int) -> list[BatchStats]:
        routes = self.routes_for(batch_id)
        routed, cached = self.router.route(frame, routes)

        def dataset_part(name: str) -> BatchStats:
            envelope, redecode = self.router.part(routed.filter(F.col(ROUTE) == name).drop(ROUTE), name)
            stats = self.writers[name](envelope, batch_id, redecode=redecode)
            crash_points.reached("after_route", batch_id)
            return stats

        def unroutable_part() -> BatchStats:
            return self.unroutable(self.router.unroutable(routed.filter(F.col(ROUTE).isNull()).drop(ROUTE), routes), batch_id,
                                   frame_anomalies)

        try:
            with session_conf(frame.sparkSession, self.part_settings), \
                    ThreadPoolExecutor(max_workers=len(self.writers) + 1, thread_name_prefix=f"route-{self.source_name}") as pool:
                # Wrapped here, in the batch's thread: the wrapper captures its local properties when it is made.
                parts = [pool.submit(inheritable_thread_target(dataset_part), name) for name in self.writers]
                parts.append(pool.submit(inheritable_thread_target(unroutable_part)))
                wait(parts)
            every = [part.result() for part in parts]
        finally:
            cached.unpersist()
        log.info("batch %s of routed source %s: %s", batch_id, self.source_name,
                 ", ".join(f"{s.dataset or 'unroutable'} in={s.records_in}" for s in every))
        return every
