"""An Observation's values and its row count, read and built with few py4j round trips.

pyspark 3.3 and 3.5's `Observation.get` copies the JVM's map into a dict through py4j's `JavaMap`, key by key: about
75 round trips for a one-value observation (counted per micro-batch; pyspark/sql/observation.py `get`:
`{k: v for k, v in jmap.items()}`). `observed` asks the same map for each named value, one round trip each after the
one that waits. pyspark 4's `get` fetches the row pickled in one call (`PythonSQLUtils.toPyRow`), so it is used as is.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, Observation
from pyspark.sql import functions as F


def observed(observation: Observation, *names: str) -> dict[str, object]:
    """The observation's values of `names`, once the action that fills it is done (waits as `Observation.get` does).
    A name the observation lacks raises KeyError, as `get` then indexing would."""
    if _pyspark_major() >= 4:
        found = observation.get
        return {name: found[name] for name in names}
    values = observation._jo.getAsJava()  # waits for the action, as Observation.get does
    result = {}
    for name in names:
        if not values.containsKey(name):
            raise KeyError(name)
        result[name] = values.get(name)
    return result


def row_count() -> Column:
    """`count(1) AS rows`, built once per JVM rather than in four round trips per write."""
    from pyspark import SparkContext

    return _row_count(SparkContext._jvm)


@functools.cache
def _row_count(jvm) -> Column:
    return F.count(F.lit(1)).alias("rows")


@functools.cache
def _pyspark_major() -> int:
    import pyspark

    return int(pyspark.__version__.split(".")[0])
