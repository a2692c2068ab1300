"""The copies the streaming job's collapse drops within a micro-batch: which keys are ranked (`ranked_keys`, `with_keys`),
and, observed while the lake write computes them, how many copies lose and how many of those differ in content from
the copy kept (docs/datasets.md, "Duplicates").

The losers are computed on the broadcast side of the write's anti join (glue_jobs/lake/packed_batch.py `lake_rows`); an
Observation there counts them in the write's own job, with no job of its own. Spark collects an observation inside the
broadcast side of a join, with adaptive execution on and off, on 3.3, 3.5 and 4.1: `CollectMetricsExec.collect`, which
gathers a query's observed metrics, is AdaptiveSparkPlanHelper's `collectWithSubqueries` over the executed plan, its
query stages included (read in the bytecode of spark-sql 3.3.4, 3.5.4 and 4.1.1); the tests show it on each line
(tests/spark/test_dropped_copies.py).
"""

from __future__ import annotations

import functools
import json
import logging
import struct
import threading

from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from glue_jobs.column_seq import ColumnSeq, select
from glue_jobs.lake.cache_leaf import frame_of, warn_once
from glue_jobs.lake.survivors import content_hash, survivor_first
from glue_jobs.observed import observed
from glue_jobs.schema import INGESTION_COLUMNS

# The most duplicated key hashes `with_keys` filters by an IN list in the plan rather than a broadcast.
KEYS_INLINE_UP_TO = 10_000
IN_SET_FROM = 10  # spark.sql.optimizer.inSetConversionThreshold's default: an IN list of more values becomes an InSet
# How long `counted` waits for the losers' observation once the write is done (Spark posts it with the write's own).
TIMEOUT_SECONDS = 60.0
_CONTENT = "_content"  # a duplicate candidate's content hash
_RANK = "_rank"
_DIFFERS = "_differs"  # a candidate's content differs from its key's survivor's

log = logging.getLogger("glue_jobs.lake.dropped_copies")


def ranked_keys(counts, without_keys: tuple[int, ...] = ()) -> str:
    """The duplicated key hashes packed_batch.lake_rows ranks (a JSON array): the counts' less `without_keys`. A filter that
    leaves none is no ranking at all, not an empty one: Spark would prune it, and an observation on it with it."""
    if not without_keys or counts.duplicate_keys == "[]":
        return counts.duplicate_keys
    left_out = set(without_keys)
    return json.dumps([h for h in json.loads(counts.duplicate_keys) if h not in left_out])


def with_keys(rows: DataFrame, duplicate_keys: str, key: str) -> DataFrame:
    """The rows whose key hash is in `duplicate_keys` (a JSON array), with no Spark job up to KEYS_INLINE_UP_TO hashes:
    up to IN_SET_FROM an array literal (generated code holds a reference to it, not its values), then an InSet built in
    the JVM (`key_set`), or where it cannot be an IN list (OptimizeIn makes it an InSet past
    `spark.sql.optimizer.inSetConversionThreshold`, also a reference); more, a broadcast semi join.
    tests/spark/test_dropped_copies.py reads the generated code for the values."""
    hashes = duplicate_keys.count(",") + 1
    if hashes <= min(IN_SET_FROM, KEYS_INLINE_UP_TO):  # Spark's In writes its values into generated code: a class a batch
        listed = ", ".join(f"{value.strip()}L" for value in duplicate_keys[1:-1].split(","))
        return rows.filter(F.expr(f"array_contains(array({listed}), `{key}`)"))  # an array literal is a reference
    if hashes <= KEYS_INLINE_UP_TO:
        return key_set(rows, duplicate_keys, key) or rows.filter(F.expr(f"`{key}` IN ({duplicate_keys[1:-1]})"))
    keys = rows.sparkSession.range(1).select(F.explode(F.from_json(F.lit(duplicate_keys), "array<bigint>")).alias(key))
    return rows.join(F.broadcast(keys), key, "left_semi")


def key_set(rows: DataFrame, duplicate_keys: str, key: str) -> DataFrame | None:
    """`rows` filtered by Spark's InSet of the hashes (what OptimizeIn makes of a long IN list: apache/spark sql/catalyst
    .../optimizer/expressions.scala), built in the JVM from the hashes as 8-byte values in one array: an IN list of 5,000
    hashes cost SQL parsing and analysis of 5,000 literals in every batch (docs/performance.md). The generated code
    refers to the set (InSet.genCodeWithSet for a long column). Spark internals (InSet, UnresolvedAttribute, the logical
    Filter, Dataset.ofRows), checked on 3.3, 3.5 and 4.1 by the tests; None, logged once, where they are not reachable."""
    values = json.loads(duplicate_keys)
    session = rows.sparkSession
    jvm = session._jvm
    try:
        array = session.sparkContext._gateway.new_array(jvm.long, len(values))
        jvm.java.nio.ByteBuffer.wrap(bytearray(struct.pack(f">{len(values)}q", *values))).asLongBuffer().get(array)
        catalyst = jvm.org.apache.spark.sql.catalyst
        condition = catalyst.expressions.InSet(catalyst.analysis.UnresolvedAttribute.quoted(key),
                                               jvm.scala.Predef.wrapLongArray(array).toSet())
        picked = frame_of(session, catalyst.plans.logical.Filter(condition, rows._jdf.queryExecution().analyzed()))
    except Py4JError as error:
        picked, reason = None, error
    else:
        reason = "no Dataset.ofRows"
    if picked is None:
        warn_once(log, "key set", f"the duplicated keys' InSet is not reachable on Spark {session.version} ({reason}): an IN list instead")
    return picked


def observed_losers(candidates: DataFrame, key: tuple[str, ...], dropped: Observation, *, row: str,
                    ignored: tuple[str, ...]) -> DataFrame:
    """The row ids (column `row`) of the candidates that lose to their key's survivor (glue_jobs/lake/survivors.py, `row` the
    last tie-break), observed into `dropped` as `losers` and `differing` (losers whose content hash differs from the
    survivor's). `candidates`: the lake columns of the rows whose key occurs more than once, plus `ignored` (row id, key
    hash), which are no content. The content is every lake column but the ingestion metadata (survivors.content_hash)."""
    fields = tuple((f.name, f.dataType) for f in candidates.schema.fields if f.name not in ignored)
    marked = select(select(candidates, _hashed(fields, SparkContext._jvm)), _marked(key, row, SparkContext._jvm))
    losing, losers, differing = _losing(SparkContext._jvm)
    return marked.filter(losing).observe(dropped, losers, differing).select(row)


def counted(dropped: Observation | None, *, timeout_seconds: float = TIMEOUT_SECONDS) -> tuple[int, int] | None:
    """(losers, differing) observed by `observed_losers`, once the write that computed them is done; (0, 0) without an
    observation (a batch without duplicates). None, logged, when Spark did not deliver it within `timeout_seconds`:
    Observation.get waits without a limit (pyspark/sql/observation.py), and a count must never hold a batch up."""
    if dropped is None:
        return 0, 0
    found: dict = {}

    def wait() -> None:
        try:
            found.update(observed(dropped, "losers", "differing"))
        except Exception as error:  # noqa: BLE001 - Spark 4.1 answers a lost observation with an empty row, which get refuses
            found["error"] = error

    waiting = threading.Thread(target=wait, name="dropped-copies", daemon=True)
    waiting.start()
    waiting.join(timeout_seconds)
    if "losers" not in found:
        log.error("the copies dropped within the batch were not observed (%s): their content is not compared",
                  found.get("error") or f"nothing within {timeout_seconds}s")
        return None
    return int(found["losers"]), int(found["differing"])


@functools.cache
def _losing(jvm) -> tuple[Column, Column, Column]:
    """The losers' filter and the two counts observed on them, built once per JVM (about forty py4j round trips a
    batch with duplicates, half of them reflection lookups, when built per batch)."""
    return (F.col(_RANK) > 1, F.count(F.lit(1)).alias("losers"),
            F.coalesce(F.sum(F.col(_DIFFERS).cast("long")), F.lit(0)).alias("differing"))


@functools.cache
def _hashed(fields: tuple, jvm) -> ColumnSeq:
    """Every candidate column plus its content hash, for these lake fields: built once per JVM and field types (only
    batches with duplicates get here)."""
    ingestion = {name for name, _, _ in INGESTION_COLUMNS}
    content = [(F.col(f"`{name}`"), data_type) for name, data_type in fields if name not in ingestion]
    return ColumnSeq([F.col("*"), content_hash(content).alias(_CONTENT)])


@functools.cache
def _marked(key: tuple[str, ...], row: str, jvm) -> ColumnSeq:
    """The row id, its rank among its key's copies and whether its content differs from the survivor's (one window)."""
    window = survivor_first(row, key=key)
    return ColumnSeq([F.col(row), F.row_number().over(window).alias(_RANK),
                      (F.col(_CONTENT) != F.first(_CONTENT).over(window)).alias(_DIFFERS)])
