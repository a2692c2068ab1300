"""Send a dataset's JSON records to a Kafka topic as AWS Glue Schema Registry frames (what the Kafka job decodes).

Each record is the dataset's JSON (what `produce` sends to Kinesis and what dead letters hold): decimals as JSON
numbers, dates as YYYY-MM-DD, timestamps as epoch numbers. It is encoded as Avro binary with the dataset's
newest schema (fastavro), and framed with that version's registry UUID (glue_jobs/registry_frames.frame), which
the caller looks up: the producer never registers a schema (the stack does, from the dataset's files).

Guarantees:
- every record is encoded before anything is sent: a record the schema cannot hold (a string for an int, 12.345
  for a decimal(10,2), a missing required field) stops the run naming its line, and nothing is sent;
- the client is librdkafka (confluent-kafka) with acks=all and enable.idempotence=true: a retry inside the client
  never writes a record twice, and a record is sent only when every in-sync replica has it;
- each record's outcome comes from its delivery report; records not confirmed (a delivery error, or not
  reported within the flush timeout) go to the unsent file in the dead-letter JSON Lines layout
  (tools/producer.py), so the file can be sent again.
- the message key is the dataset's key fields, so the copies of one key stay in one partition, in order.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, localcontext
from pathlib import Path

from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset
from glue_jobs.registry_frames import NO_COMPRESSION, frame
from tools.errors import ToolError

# librdkafka settings of every producer this tool makes (CONFIGURATION.md of librdkafka names each).
PRODUCER_SETTINGS = {"acks": "all", "enable.idempotence": True, "compression.type": "zstd", "linger.ms": 20}


class AvroFramer:
    """Dataset JSON text -> a Schema Registry frame of one of the dataset's versions (the newest unless `version` is
    given; `version_id`: that version's registry UUID)."""

    def __init__(self, dataset: Dataset, version_id: str, *, compression: int = NO_COMPRESSION,
                 version: int | None = None) -> None:
        import fastavro

        from glue_jobs.dataset_types import parse_schema

        self.dataset, self.version_id, self.compression = dataset, version_id, compression
        self.version = dataset.latest_version if version is None else version
        self._schema = fastavro.parse_schema(dataset.avro(self.version))
        self._root = parse_schema(dataset.avro(self.version), f"dataset {dataset.name} v{self.version}")

    def key(self, record: dict) -> bytes:
        return "|".join(str(record.get(name, "")) for name in self.dataset.key).encode()

    def frame(self, text: str, where: str) -> tuple[bytes, bytes]:
        """(key, framed value) of one JSON record; ToolError naming `where` and the field when it does not fit."""
        import fastavro

        try:
            record = json.loads(text, parse_float=Decimal)
        except json.JSONDecodeError as error:
            raise ToolError(f"{where}: not JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise ToolError(f"{where}: not a JSON object")
        datum = _datum(self._root, record, "", where)
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self._schema, datum, strict=True)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ToolError(f"{where}: does not fit dataset {self.dataset.name} v{self.version}: {error}") from None
        return self.key(record), frame(self.version_id, out.getvalue(), compression=self.compression)


def _datum(node: Node, value, path: str, where: str):
    """The JSON value as fastavro writes it: decimals as Decimal (exact), dates as date; the rest as parsed."""
    if value is None:
        return None
    kind = node.kind
    if kind == "decimal":
        if isinstance(value, bool) or not isinstance(value, int | Decimal):
            raise ToolError(f"{where}: {path}: a decimal must be a JSON number, got {value!r}")
        with localcontext() as context:
            context.prec = 80  # wider than any decimal(38, s): quantize never rounds or overflows here
            scaled = Decimal(value).quantize(Decimal(1).scaleb(-node.scale))  # exact, or the check below refuses it
        if scaled != Decimal(value) or len(scaled.as_tuple().digits) > node.precision:
            raise ToolError(f"{where}: {path}: {value} is not a decimal({node.precision},{node.scale}) (never rounded)")
        return scaled
    if kind == "date":
        try:
            return date.fromisoformat(value) if isinstance(value, str) else value
        except ValueError:
            raise ToolError(f"{where}: {path}: {value!r} is not a date (YYYY-MM-DD)") from None
    if kind in ("float", "double") and isinstance(value, Decimal):
        return float(value)
    if kind == "record" and isinstance(value, dict):
        return {f.name: _datum(f.type, value.get(f.name), f"{path}.{f.name}" if path else f.name, where) for f in node.fields}
    if kind == "array" and isinstance(value, list):
        return [_datum(node.items, item, f"{path}[{i}]", where) for i, item in enumerate(value)]
    if kind == "map" and isinstance(value, dict):
        return {k: _datum(node.items, item, f"{path}.{k}", where) for k, item in value.items()}
    return value


@dataclass
class KafkaSendResult:
    sent: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (where, why) of each record not confirmed
    offsets: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset) of each record sent
    unsent_path: Path | None = None


def send(settings: dict, topic: str, items: Iterable[tuple[str, str]], framer: AvroFramer, *,
         unsent_path: Path | None = None, flush_seconds: float = 60.0) -> KafkaSendResult:
    """Encode every record (all or nothing), then produce them and wait for each delivery report."""
    from confluent_kafka import Producer

    framed = [(where, text, *framer.frame(text, where)) for where, text in items]
    producer = Producer({**PRODUCER_SETTINGS, **settings})
    result, pending = KafkaSendResult(), {}

    def delivered(where: str):
        def report(error, message) -> None:
            pending.pop(where, None)
            if error is None:
                result.sent += 1
                result.offsets.append((message.partition(), message.offset()))
            else:
                result.failed.append((where, str(error)))
        return report

    for where, text, key, value in framed:
        pending[where] = text
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered(where))
                break
            except BufferError:  # the client's queue is full: let it deliver, then queue this record
                producer.poll(0.5)
        producer.poll(0)
    producer.flush(flush_seconds)
    del producer  # closes librdkafka's client (its threads and connections) now, not whenever it is collected
    texts = {where: text for where, text, _, _ in framed}
    result.failed += [(where, f"no delivery report within {flush_seconds:.0f} s") for where in list(pending)]
    if result.failed:
        result.unsent_path = unsent_path or Path("unsent.jsonl")
        with result.unsent_path.open("w", encoding="utf-8") as out:
            for where, why in result.failed:
                out.write(json.dumps({"payload": texts[where], "reason": "not_sent", "detail": f"{where}: {why}"}) + "\n")
    return result
