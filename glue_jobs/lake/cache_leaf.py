"""The persisted batch as a plan of one node, its cache (glue_jobs/lake/packed_batch.py reads the batch through it)."""

from __future__ import annotations

import logging

from py4j.java_gateway import JavaPackage
from py4j.protocol import Py4JError
from pyspark.sql import DataFrame


def cached_leaf(persisted: DataFrame) -> DataFrame:
    """The persisted frame as a plan of one node, its cache: Spark's InMemoryRelation, found as the CacheManager finds
    it for any query (`lookupCachedData(Dataset)`; apache/spark sql/core .../execution/CacheManager.scala) and made a
    DataFrame with `Dataset.ofRows(session, plan)` (org.apache.spark.sql.Dataset in Spark 3,
    org.apache.spark.sql.classic.Dataset in Spark 4). A query on the persisted frame itself carries the validation's
    plan, thousands of expressions, which every DataFrame operation analyzes again and every query matches against
    the cache; on the leaf it does not. The relation keeps the plan that fills it, so a lost cached partition is
    computed again from the batch, as before. These are Spark internals, checked on Spark 3.3, 3.5 and 4.1 (tests) and unverified on
    Glue's own Spark builds: where they are missing, the batch reads the persisted frame, logged once, with the same rows."""
    session = persisted.sparkSession
    try:
        cached = session._jsparkSession.sharedState().cacheManager().lookupCachedData(persisted._jdf)
        if cached.isDefined() and (leaf := frame_of(session, cached.get().cachedRepresentation())) is not None:
            return leaf
    except Py4JError as error:
        warn_once(_log, "leaf", f"the batch cache's plan node is not reachable on Spark {session.version} ({error}); reading the persisted frame")
        return persisted
    warn_once(_log, "no leaf", f"no cache entry or Dataset.ofRows on Spark {session.version}; reading the persisted frame")
    return persisted


def frame_of(session, plan) -> DataFrame | None:
    """A DataFrame of a logical plan built in the JVM (`Dataset.ofRows`, which analyzes it), None on a Spark without it."""
    for name in ("org.apache.spark.sql.classic.Dataset", "org.apache.spark.sql.Dataset"):
        holder = getattr(session._jvm, name)
        if not isinstance(holder, JavaPackage):  # a class of this Spark
            return DataFrame(holder.ofRows(session._jsparkSession, plan), session)
    return None


def one_stage(leaf: DataFrame) -> DataFrame:
    """`leaf` (cached_leaf's frame) coalesced to one partition when its cache is one partition, else `leaf`: an
    aggregation over a plan of one partition that Spark knows as such (CoalesceExec of 1 reports SinglePartition,
    apache/spark sql/core .../execution/basicPhysicalOperators.scala) needs no exchange, so the counts' two
    aggregations run in one stage instead of three, and a task no fewer. How many partitions the cache has: its RDD,
    `InMemoryRelation.cacheBuilder.cachedColumnBuffers` (sql/core .../execution/columnar/InMemoryRelation.scala), which
    the first query over the cache would build anyway; a cache of more partitions is not coalesced (its tasks would
    run one at a time). Where the relation is not reachable (the persisted frame itself), `leaf` as it is, logged once."""
    try:
        partitions = leaf._jdf.queryExecution().analyzed().cacheBuilder().cachedColumnBuffers().getNumPartitions()
    except Py4JError as error:
        warn_once(_log, "partitions", f"the batch cache's partitions are not reachable on Spark {leaf.sparkSession.version} ({error}): counted in three stages")
        return leaf
    return leaf.coalesce(1) if partitions == 1 else leaf


_log = logging.getLogger("glue_jobs.lake.packed_batch")
_WARNED: set[str] = set()


def warn_once(log: logging.Logger, kind: str, message: str) -> None:
    """`message`, the first time `kind` (what fell back) happens in this process: a py4j error's text names a new object
    id on every call, so the message itself would be new every batch."""
    if kind not in _WARNED:
        _WARNED.add(kind)
        log.warning(message)
