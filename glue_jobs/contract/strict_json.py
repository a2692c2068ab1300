"""The typed contract's fast path in the JVM: com.streamlake.glue.StrictJsonRecord (jvm/glue-functions) reads a JSON
payload once with Jackson and answers the record in the plain parse's shape only when no token was coerced, else
null (its class doc says exactly when). glue_jobs/contract/typed_contract.py uses it where the jar is on the classpath
(--extra-jars on Glue, spark.jars locally) and proves the same with Spark expressions (glue_jobs/contract/typed_screen.py)
where it is not; either way a record it does not prove takes the strict path, so the results are the same. A json_text
field's value (any JSON value) it answers as the JSON text the strict path stores.

What it answers carries the guarantees of a record the Kafka decoder typed (a value for every required field, no NaN
or infinity, exact decimals) and passes the checks the contract makes on such a record (typed_checks.suspect with
decoded=True: blank required strings, enum symbols after normalize, dates, timestamp ranges), which `value_checks`
hands it; so the contract checks a record it answers no further for its types, only for the event time and the rules.

`register(session, dataset)` registers the function on `session` (a streaming query plans its batches in a clone of
the job's session, with a function registry of its own, so the batch frame's session is the one to register on) and
returns its SQL name, or None without the jar. The way taken is logged once per process.
"""

from __future__ import annotations

import hashlib
import logging
from functools import cache

from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset
from glue_jobs.decoding import typed_parse as tp

STRICT_JSON_CLASS = "com.streamlake.glue.StrictJsonRecord"
# Registered beside it for a dataset with a decimal: the path of a record's first decimal its declared type does not
# hold exactly (its class doc), for the records the proof does not answer.
INEXACT_DECIMAL_CLASS = "com.streamlake.glue.InexactDecimal"
log = logging.getLogger(__name__)
_LOGGED: set[str] = set()


def spec_type(node: Node):
    """The schema as the function reads it: the plain parse's Spark type, but a field, array element or map value
    that is required is not nullable, and a decimal has its declared precision and scale (it answers a decimal only
    when that type holds it exactly; the value answered is the plain parse's, in the wide type)."""
    from pyspark.sql import types as T

    if node.kind == "record":
        return T.StructType([T.StructField(f.name, spec_type(f.type), nullable=not f.type.required) for f in node.fields])
    if node.kind == "array":
        return T.ArrayType(spec_type(node.items), containsNull=not node.items.required)
    if node.kind == "map":
        return T.MapType(T.StringType(), spec_type(node.items), valueContainsNull=not node.items.required)
    if node.kind == "decimal":
        return T.DecimalType(node.precision, node.scale)
    return tp.wire_type(node, "")


def value_checks(dataset: Dataset) -> str:
    """The checks typed_checks.suspect(decoded=True) makes, as the function reads them (its `checks` doc): one line
    per field path of a string, enum or date with a check (required: not blank; enum: its symbols after the
    normalize steps; date: a calendar day) and of a timestamp number (Spark's range)."""
    from glue_jobs.contract.typed_checks import _INTEGER_BOUNDS

    normalize = {r.path: r.normalize for r in dataset.rules if r.normalize}
    lines: list[str] = []

    def walk(node: Node, path: str) -> None:
        if node.kind in ("string", "enum", "date") and (node.required or node.kind != "string"):
            symbols = ",".join(node.symbols) if node.kind == "enum" else ""
            steps = ",".join(normalize.get(path, ())) if node.kind == "enum" else ""
            lines.append("\t".join(("text", path, str(int(node.required)), str(int(node.kind == "date")), steps, symbols)))
        elif node.kind in ("timestamp-millis", "timestamp-micros"):
            low, high = _INTEGER_BOUNDS[node.kind]
            lines.append("\t".join(("range", path, str(low), str(high))))
        elif node.kind == "record":
            for f in node.fields:
                walk(f.type, f"{path}.{f.name}" if path else f.name)
        elif node.kind in ("array", "map"):
            walk(node.items, f"{path}[]")

    walk(dataset.schema, "")
    return "\n".join(lines)


def _arguments(dataset: Dataset) -> tuple[str, str, str]:
    """What the function is built with: the spec_type as JSON, the json_text field paths ('\\n'-separated) and the
    value checks."""
    return spec_type(dataset.schema).json(), "\n".join(sorted(dataset.json_text)), value_checks(dataset)


def function_name(dataset: Dataset) -> str:
    """A SQL name for the dataset's function: it names what the function is built with, so two datasets (or two
    versions of one) never share a name."""
    digest = hashlib.sha256("\0".join(_arguments(dataset)).encode()).hexdigest()[:16]
    return f"streamlake_strict_json_{digest}"


@cache
def _function(dataset: Dataset, jvm):
    """(the JVM function, its Spark return type) for the dataset, or None without the class; built once per JVM."""
    from py4j.java_gateway import JavaClass

    found = jvm
    for part in STRICT_JSON_CLASS.split("."):
        found = getattr(found, part)
    way = (f"{STRICT_JSON_CLASS}: one Jackson read per JSON record" if isinstance(found, JavaClass) else
           f"Spark expressions ({STRICT_JSON_CLASS} is not on the classpath: jvm/glue-functions jar)")
    if way not in _LOGGED:
        _LOGGED.add(way)
        log.info("typed contract: proving JSON records with %s", way)
    if not isinstance(found, JavaClass):
        return None
    # It answers a decoded record's type: decimals at their declared precision and scale, which hold every decimal it
    # answers exactly and are the lake's stored types (docs/datasets.md "Performance").
    from glue_jobs.decoding.registry_frames import record_type

    returns = jvm.org.apache.spark.sql.types.DataType.fromJson(record_type(dataset).json())
    return found(*_arguments(dataset)), returns


def inexact_decimal_name(proof: str) -> str:
    """The SQL name of the InexactDecimal function registered beside the proof named `proof`."""
    return f"{proof}_inexact_decimal"


def register(session, dataset: Dataset) -> str | None:
    """Register the dataset's function on `session` (and, for a dataset with a decimal, its InexactDecimal function
    as `inexact_decimal_name`); its SQL name, or None when the class is not on the classpath."""
    jvm = session.sparkContext._jvm
    found = _function(dataset, jvm)
    if found is None:
        return None
    name = function_name(dataset)
    session._jsparkSession.udf().register(name, *found)
    inexact = _inexact_decimal(dataset, jvm)
    if inexact is not None:
        session._jsparkSession.udf().register(inexact_decimal_name(name), inexact, jvm.org.apache.spark.sql.types.DataTypes.StringType)
    return name


@cache
def _inexact_decimal(dataset: Dataset, jvm):
    """The dataset's InexactDecimal function (None without a decimal field); built once per JVM."""
    if not dataset.schema.has_decimal:
        return None
    found = jvm
    for part in INEXACT_DECIMAL_CLASS.split("."):
        found = getattr(found, part)
    return found(spec_type(dataset.schema).json())
