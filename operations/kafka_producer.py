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
  (operations/producer.py), so the file can be sent again.
- the message key is the dataset's key fields, so the copies of one key stay in one partition, in order.

Dead letters replayed to a topic: a row whose reason is a frame reason (malformed_record, unknown_schema_version) holds
the record's original value in base64; those bytes are sent unchanged (after the version is deployed, the job decodes
them). Every other row holds the record's JSON, which is encoded with the newest version like a file's line.

Auth on MSK: SASL OAUTHBEARER over TLS on port 9098 with a token from aws-msk-iam-sasl-signer-python, whose README
wires confluent-kafka as {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": ...}, the
callback returning (token, expiry in seconds: the signer gives milliseconds). Unverified here (no MSK cluster): the
token against a real broker; tests check the token is a presigned kafka-cluster:Connect request for the region.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, localcontext
from pathlib import Path

from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset
from glue_jobs.decoding.registry_frames import (
    HEADER_VERSION,
    MALFORMED_RECORD,
    NO_COMPRESSION,
    UNKNOWN_SCHEMA_VERSION,
    definition_problem,
    frame,
)
from operations.errors import ToolError

# librdkafka settings of every producer this tool makes (CONFIGURATION.md of librdkafka names each).
PRODUCER_SETTINGS = {"acks": "all", "enable.idempotence": True, "compression.type": "zstd", "linger.ms": 20}
# Dead-letter reasons whose payload is the record's value in base64 (the frame the job could not decode), not JSON;
# `not_sent_frame` marks such a frame in the unsent file of a replay that did not deliver it.
NOT_SENT, NOT_SENT_FRAME = "not_sent", "not_sent_frame"
FRAME_REASONS = (MALFORMED_RECORD, UNKNOWN_SCHEMA_VERSION, NOT_SENT_FRAME)
AUTH_MODES = ("iam", "none")


def client_settings(bootstrap_servers: str, *, auth: str, region: str | None, profile: str | None = None,
                    timeout_s: int = 120) -> dict:
    """librdkafka settings for one producer: the brokers, IAM auth (or none, for a broker without auth such as the
    local test broker), and how long librdkafka retries each record before reporting it failed."""
    if auth not in AUTH_MODES:
        raise ToolError(f"--kafka-auth {auth!r}: expected one of {', '.join(AUTH_MODES)}")
    settings = {"bootstrap.servers": bootstrap_servers, "message.timeout.ms": timeout_s * 1000}
    if auth == "iam":
        if not region:
            raise ToolError("IAM auth to MSK signs for a region: pass --region or configure the environment's region")
        settings |= {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                     "oauth_cb": iam_token_callback(region, profile)}
    return settings


def iam_token_callback(region: str, profile: str | None = None):
    """confluent-kafka's oauth_cb: a fresh MSK IAM token (aws-msk-iam-sasl-signer-python) and its expiry in seconds."""
    def token(_config: str) -> tuple[str, float]:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

        if profile:
            value, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_profile(region, profile)
        else:
            value, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
        return value, expiry_ms / 1000
    return token


def newest_registered(glue, *, registry_name: str, schema_name: str, dataset: Dataset) -> str:
    """The registry UUID of the dataset's newest version, which must be the registry schema's newest and hold the same
    definition as the dataset's file. The producer never registers: the stack does, from the files."""
    schema_id = {"RegistryName": registry_name, "SchemaName": schema_name}
    try:
        found = glue.get_schema_version(SchemaId=schema_id, SchemaVersionNumber={"LatestVersion": True})
    except glue.exceptions.EntityNotFoundException:
        raise ToolError(f"registry schema {registry_name}/{schema_name} does not exist: deploy the environment first") from None
    number, newest = found["VersionNumber"], dataset.latest_version
    if number < newest:
        raise ToolError(f"datasets/{dataset.name} has schema v{newest}, the registry's newest is v{number}: deploy the "
                        "stack that registers it before producing with it (the producer never registers a schema)")
    if number > newest:
        raise ToolError(f"the registry holds v{number} of {schema_name}, this checkout's datasets/{dataset.name} ends at "
                        f"v{newest}: update the checkout, so records are encoded with the newest version")
    if (problem := definition_problem(dataset, found, newest)) is not None:
        raise ToolError(f"{schema_name}: {problem}: a committed version never changes")
    if found.get("Status", "AVAILABLE") != "AVAILABLE":
        raise ToolError(f"registry version {number} of {schema_name} is {found['Status']}, not AVAILABLE")
    return found["SchemaVersionId"]


def replay_payload(where: str, payload: str, reason: str | None) -> str | bytes:
    """What a dead-letter row sends: its original frame (bytes) for a frame reason, else its JSON text."""
    if reason not in FRAME_REASONS:
        return payload
    try:
        value = base64.b64decode(payload, validate=True)
    except binascii.Error:
        raise ToolError(f"{where}: a {reason} dead letter's payload is not base64") from None
    return value


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

    def frame(self, text: str | bytes, where: str) -> tuple[bytes | None, bytes]:
        """(key, value): a JSON text encoded and framed; bytes (a replayed dead letter's frame) sent as they are."""
        if isinstance(text, bytes):
            if text[:1] != bytes([HEADER_VERSION]):
                raise ToolError(f"{where}: a replayed frame must start with byte {HEADER_VERSION}; it is not a Schema "
                                "Registry frame and would only be dead-lettered again (leave it out with --reason)")
            return None, text
        return self.encode(text, where)

    def encode(self, text: str, where: str) -> tuple[bytes, bytes]:
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


def send(settings: dict, topic: str, items: Iterable[tuple[str, str | bytes]], framer: AvroFramer, *,
         unsent_path: Path | None = None, flush_seconds: float = 60.0) -> KafkaSendResult:
    """Encode every record (all or nothing), then produce them and wait for each delivery report. An item's payload is
    a JSON text, or the bytes of a frame to send unchanged (a replayed dead letter, see `replay_payload`)."""
    from confluent_kafka import Producer

    framed = [(where, payload, *framer.frame(payload, where)) for where, payload in items]
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

    for where, payload, key, value in framed:
        pending[where] = payload
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered(where))
                break
            except BufferError:  # the client's queue is full: let it deliver, then queue this record
                producer.poll(0.5)
        producer.poll(0)
    producer.flush(flush_seconds)
    del producer  # closes librdkafka's client (its threads and connections) now, not whenever it is collected
    payloads = {where: payload for where, payload, _, _ in framed}
    result.failed += [(where, f"no delivery report within {flush_seconds:.0f} s") for where in list(pending)]
    if result.failed:
        result.unsent_path = unsent_path or Path("unsent.jsonl")
        with result.unsent_path.open("w", encoding="utf-8") as out:
            for where, why in result.failed:
                out.write(json.dumps(_unsent_row(payloads[where], f"{where}: {why}")) + "\n")
    return result


def _unsent_row(payload: str | bytes, detail: str) -> dict:
    """A dead-letter row `produce --dead-letters` sends again: JSON as it was, a frame in base64 (`not_sent_frame`)."""
    if isinstance(payload, bytes):
        return {"payload": base64.b64encode(payload).decode("ascii"), "reason": NOT_SENT_FRAME, "detail": detail}
    return {"payload": payload, "reason": NOT_SENT, "detail": detail}
