"""The sources of one job side by side: each source's query in a thread of its own, its Spark jobs in a fair-scheduler
pool of its own, so a busy source does not hold back a quiet one.

Why threads: `GlueContext.forEachBatch` blocks while its query runs, and restarts it (up to batchMaxRetries) when it
fails (awsglue/context.py: `while (True): ... query.start().awaitTermination()`). Calling it once per source, each in
its own thread, keeps its retry and persist behaviour for every source.

Why pools: with Spark's default FIFO scheduling, the jobs of a busy source's batch take every core until they end, and
a quiet source's jobs wait behind them. `spark.scheduler.mode` FAIR shares the cores between pools; a pool named in
`spark.scheduler.pool` and not declared in an allocation file is created with the default properties, FIFO inside,
weight 1, minShare 0 (Spark's Pool defaults, apache/spark pull 23865), so each source gets an equal share while it has
work. A query's jobs run in the pool of the thread that started it: "setLocalProperty(\"spark.scheduler.pool\", ...)"
then `writeStream ... start()` (Databricks, "Use scheduler pools for multiple streaming workloads"); the query's
thread inherits the local properties of the thread that starts it (SparkContext's localProperties is an
InheritableThreadLocal), and the batch function's dead-letter thread inherits its batch's (glue_jobs/batch.py). Each
source thread is made with pyspark's `inheritable_thread_target`, as SparkContext.setLocalProperty's notes ask of
threads that run jobs in parallel.

A source whose query fails (past forEachBatch's retries) ends the job, the source named: run_sources raises at once.
The other sources' threads are daemons, so the process ending stops their queries where they are, as a kill would;
each resumes from its own checkpoint on the next run, and its commit markers keep a replayed batch from being written
twice (docs/streaming-job.md "One job, several sources"). On Glue, that the run then ends FAILED with the other
threads still inside their queries follows from Spark's PythonRunner (a Python driver exiting non-zero fails the
application); Glue's own launcher is not public: unverified there.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping

log = logging.getLogger("streamlake.source_queries")
POOL_PROPERTY = "spark.scheduler.pool"
FAIR_SCHEDULING = {"spark.scheduler.mode": "FAIR"}  # static: set before the SparkContext starts (glue_entry.main)


class SourceFailed(RuntimeError):
    """A source's query ended with an error; `source` names it, the error is its cause."""

    def __init__(self, source: str, error: BaseException) -> None:
        super().__init__(f"source {source}: its query failed: {type(error).__name__}: {error}")
        self.source = source


def run_sources(sc, starts: Mapping[str, Callable[[], None]], *, poll_seconds: float = 1.0) -> list[str]:
    """Run each source's `start()` (it blocks while the source's query runs) in a daemon thread of its own, its Spark
    jobs in the fair-scheduler pool named after the source. Returns the sources in the order their starts returned,
    once all have; raises SourceFailed for the first one that raised, without waiting for the others."""
    if not starts:
        raise ValueError("run_sources: no source to run")
    from pyspark import inheritable_thread_target

    ended: queue.Queue = queue.Queue()

    def run(source: str, start: Callable[[], None]) -> None:
        try:
            sc.setLocalProperty(POOL_PROPERTY, source)
            start()
        except BaseException as error:  # noqa: BLE001 (handed to the main thread, which raises it)
            ended.put((source, error))
        else:
            ended.put((source, None))

    for source, start in starts.items():
        threading.Thread(target=inheritable_thread_target(run), args=(source, start), name=f"source-{source}",
                         daemon=True).start()
    finished: list[str] = []
    while len(finished) < len(starts):
        try:
            source, error = ended.get(timeout=poll_seconds)  # a timeout, so the main thread still sees KeyboardInterrupt
        except queue.Empty:
            continue
        if error is not None:
            log.error("source %s: its query failed; the job stops (the other sources resume from their checkpoints "
                      "on the next run)", source)
            raise SourceFailed(source, error) from error
        log.info("source %s: its query ended", source)
        finished.append(source)
    return finished
