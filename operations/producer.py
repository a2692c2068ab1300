"""Send newline-delimited JSON, or replay dead letters, to a Kinesis stream with PutRecords.

Limits (Kinesis PutRecords API reference): at most 500 records and 5 MiB per request, at most
1 MiB per record, where a record's size is its data plus its partition key (UTF-8 bytes);
partition keys are 1 to 256 Unicode characters.

Guarantees:
- Every input record is checked (size, UTF-8, JSON unless --allow-invalid-json) BEFORE anything is
  sent, so a bad line never leaves half a file on the stream.
- A PutRecords call can fail for some entries only: those carry an ErrorCode in the response. Only
  those entries are resent, with exponential backoff, up to `max_attempts` calls per batch. Entries
  the stream accepted are never sent again.
- When a batch still fails after the last attempt (or the stream refuses the call outright), the
  run stops and every record not confirmed sent (the failed ones and all not yet tried) is written
  to the unsent file, in the dead-letter JSON Lines layout, so `--dead-letters <that file>` sends
  exactly the rest.

Who retries what: botocore makes one attempt per PutRecords call (operations/aws.py); this module makes
every retry, so each is counted. A whole call refused by throttling wrote nothing and is resent whole.
A whole call that failed with a server error (InternalFailureException, 5xx) may have written some of
its records: it is resent whole too, and its records are counted as possible duplicates (at-least-once,
as every Kinesis producer; the lake deduplicates event_id). A timeout or connection error stops the run,
and the call's records go to the unsent file marked outcome_unknown.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from operations.errors import ToolError
from operations.progress import Progress

MAX_RECORDS_PER_REQUEST = 500
MAX_REQUEST_BYTES = 5 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024
MAX_PARTITION_KEY_CHARS = 256
DEFAULT_PARTITION_KEY_FIELD = "event_id"

# Whole-call errors the tool resends the batch after (botocore makes one attempt, operations/aws.py).
# Throttling: the request was refused, so nothing of it was written and a resend duplicates nothing.
THROTTLED_CALL_ERRORS = frozenset({
    "ProvisionedThroughputExceededException", "KMSThrottlingException", "LimitExceededException",
    "ThrottlingException",
})
# Server errors: the outcome is unknown (Kinesis may have written some records before failing), so a
# resend may duplicate them; they are counted as possible duplicates. InternalFailureException is the
# 500 the Kinesis API models; the others are the generic spellings.
SERVER_CALL_ERRORS = frozenset({
    "InternalFailureException", "InternalFailure", "InternalServerError", "ServiceUnavailable",
})
RETRYABLE_CALL_ERRORS = THROTTLED_CALL_ERRORS | SERVER_CALL_ERRORS


@dataclass(frozen=True)
class Record:
    origin: str  # where it came from, for error messages: "events.ndjson line 12"
    data: bytes
    partition_key: str

    @property
    def size(self) -> int:
        return len(self.data) + len(self.partition_key.encode("utf-8"))


# ----------------------------------------------------------------------------------------------
# Inputs: (origin, payload bytes) pairs, re-iterable so they can be checked first and sent second


class NdjsonFile:
    """A newline-delimited JSON file (optionally .gz). Blank lines are skipped; CRLF is accepted."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ToolError(f"--file {str(self.path)!r}: no such file")

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        """(where, record) of each line; a blank line is no record, so it is not sent, and counted in `blank_lines` (the
        local job's file source, which reads every line as a record, dead-letters one as malformed_json)."""
        opener = gzip.open if self.path.suffix == ".gz" else open
        self.blank_lines = 0
        with opener(self.path, "rb") as handle:
            for line_no, line in enumerate(handle, start=1):
                line = line.rstrip(b"\n")
                if line.endswith(b"\r"):
                    line = line[:-1]
                if line.strip():
                    yield f"{self.path} line {line_no}", line
                else:
                    self.blank_lines += 1


@dataclass
class DeadLetters:
    """Dead letters (Parquet or JSON Lines, .gz allowed) under a local path or an s3:// prefix.

    Each row's `payload` (the original record text) is what gets sent; `reasons` narrows the
    replay to some reason codes. Files or folders whose name starts with `_` or `.` (Spark staging,
    checksums, _SUCCESS) are skipped, as every lake reader skips them.
    """

    location: str
    reasons: tuple[str, ...] = ()
    s3: object | None = None
    _rows: list[tuple[str, bytes, str | None]] | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        return ((where, payload) for where, payload, _ in self.rows())

    def rows(self) -> list[tuple[str, bytes, str | None]]:
        """(where, payload, reason) of every row, read once."""
        if self._rows is None:
            self._rows = list(self._load())
        return self._rows

    def _load(self) -> Iterator[tuple[str, bytes, str | None]]:
        if self.location.startswith("s3://"):
            with tempfile.TemporaryDirectory(prefix="streamlake-replay-") as tmp:
                files = _download_s3_prefix(self.s3, self.location, Path(tmp))
                yield from _read_dead_letter_files(files, self.reasons, display_root=(Path(tmp), self.location))
        else:
            root = Path(self.location)
            if not root.exists():
                raise ToolError(f"--dead-letters {self.location!r}: no such file or directory")
            if root.is_file() and not _dead_letter_kind(root):
                # Read by name, as every reader of the lake reads: a renamed unsent file would otherwise
                # send nothing and succeed.
                raise ToolError(f"--dead-letters {self.location!r}: not a dead-letter file name; expected "
                                f"{', '.join(DEAD_LETTER_SUFFIXES)}")
            files = [root] if root.is_file() else _visible_files(root)
            if not files:
                raise ToolError(f"--dead-letters {self.location!r}: no Parquet or JSON Lines files under that folder")
            yield from _read_dead_letter_files(files, self.reasons, display_root=None)


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.parts)


JSON_LINES_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")
DEAD_LETTER_SUFFIXES = (".parquet", *JSON_LINES_SUFFIXES)


def _dead_letter_kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(JSON_LINES_SUFFIXES):
        return "jsonl"
    return None


def _visible_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not _is_hidden(p.relative_to(root))
                  and _dead_letter_kind(p))


def _download_s3_prefix(s3, uri: str, target: Path) -> list[Path]:
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    if not bucket:
        raise ToolError(f"--dead-letters {uri!r}: expected s3://<bucket>/<prefix>")
    # A location names a folder (or one file): `dead_letters/orders` must not also match `dead_letters/orders-eu/`.
    if prefix and not _dead_letter_kind(Path(prefix)):
        prefix = prefix.rstrip("/") + "/"
    files = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            relative = Path(obj["Key"][len(prefix):].lstrip("/") or Path(obj["Key"]).name)
            if _is_hidden(relative) or not _dead_letter_kind(relative):
                continue
            local = target / relative
            local.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(local))
            files.append(local)
    if not files:
        raise ToolError(f"--dead-letters {uri!r}: no Parquet or JSON Lines files under that prefix")
    return sorted(files)


def _read_dead_letter_files(files: list[Path], reasons: tuple[str, ...],
                            display_root: tuple[Path, str] | None) -> Iterator[tuple[str, bytes, str | None]]:
    def shown(path: Path) -> str:
        if display_root is None:
            return str(path)
        local_root, uri = display_root
        return uri.rstrip("/") + "/" + str(path.relative_to(local_root))

    parquet = [f for f in files if _dead_letter_kind(f) == "parquet"]
    for path in files:
        if _dead_letter_kind(path) != "jsonl":
            continue
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{shown(path)} line {line_no}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ToolError(f"{where}: not a dead-letter row (invalid JSON: {exc.msg})") from None
                if not isinstance(row, dict) or not isinstance(row.get("payload"), str):
                    raise ToolError(f"{where}: not a dead-letter row (needs a string field 'payload')")
                if not reasons or row.get("reason") in reasons:
                    yield where, row["payload"].encode("utf-8"), row.get("reason")
    if parquet:
        yield from _read_parquet_payloads(parquet, reasons, shown)


def _read_parquet_payloads(files: list[Path], reasons: tuple[str, ...], shown) -> Iterator[tuple[str, bytes, str | None]]:
    # pyarrow is not a project dependency; Spark (pinned in requirements-dev.txt, and what wrote
    # these files) reads them. Started only when a replay actually contains Parquet, so the tools'
    # own requirements (requirements.txt, no Spark) replay JSON Lines and say what Parquet needs.
    try:
        from pyspark.sql import functions as F
    except ImportError:
        raise ToolError(
            f"{len(files)} of the dead-letter files are Parquet ({shown(files[0])}, ...): reading Parquet needs "
            "pyspark, which the tools' requirements.txt leaves out; run the tool from the development "
            "environment (make bootstrap, then .venv/bin/streamlake produce ...). Nothing was sent."
        ) from None

    from glue_jobs.session import local_session

    spark = local_session("streamlake-replay", master="local[1]")
    for path in files:
        frame = spark.read.parquet(str(path))
        if "payload" not in frame.columns:
            raise ToolError(f"{shown(path)}: not a dead-letter file (no 'payload' column)")
        if reasons:
            frame = frame.filter(F.col("reason").isin(list(reasons)))
        reason = F.col("reason") if "reason" in frame.columns else F.lit(None).cast("string")
        for index, row in enumerate(frame.select("payload", reason.alias("reason")).collect(), start=1):
            if row["payload"] is not None:
                yield f"{shown(path)} row {index}", row["payload"].encode("utf-8"), row["reason"]


# ----------------------------------------------------------------------------------------------
# Turning payloads into records


def partition_key_for(data: bytes, parsed: object, field_name: str | None) -> str:
    """The value of `field_name` when the record has a usable one, else the MD5 hex of the record.

    Usable: a non-empty string or a number, at most 256 characters. The fallback is deterministic
    (the same line always lands on the same shard) and spreads records evenly over shards.
    """
    if field_name and isinstance(parsed, dict):
        value = parsed.get(field_name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and 0 < len(value) <= MAX_PARTITION_KEY_CHARS:
            return value
    # usedforsecurity=False: a shard spreader, not security (FIPS builds of Python refuse md5 otherwise).
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def to_records(items: Iterable[tuple[str, bytes]], *, partition_key_field: str | None,
               allow_invalid_json: bool) -> Iterator[Record]:
    for origin, data in items:
        parsed: object = None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{origin}: not valid UTF-8; records must be UTF-8 JSON") from None
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            if not allow_invalid_json:
                raise ToolError(
                    f"{origin}: not valid JSON ({exc.msg} at column {exc.colno}); fix it, or pass "
                    "--allow-invalid-json to send it anyway (e.g. to exercise the dead-letter path)"
                ) from None
        record = Record(origin, data, partition_key_for(data, parsed, partition_key_field))
        if record.size > MAX_RECORD_BYTES:
            raise ToolError(
                f"{origin}: record is {record.size} bytes with its partition key; Kinesis accepts at most "
                f"{MAX_RECORD_BYTES} bytes (1 MiB) per record. Nothing was sent."
            )
        yield record


def batches(records: Iterable[Record]) -> Iterator[list[Record]]:
    """Consecutive batches of at most 500 records and 5 MiB (data + partition keys)."""
    batch: list[Record] = []
    size = 0
    for record in records:
        if batch and (len(batch) == MAX_RECORDS_PER_REQUEST or size + record.size > MAX_REQUEST_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(record)
        size += record.size
    if batch:
        yield batch


# ----------------------------------------------------------------------------------------------
# Sending


@dataclass
class SendResult:
    sent: int = 0
    requests: int = 0
    retried: int = 0  # entries resent after a per-record or whole-call failure
    # entries resent after a server error, which Kinesis may have written already: at most this many
    # records are on the stream twice (the lake deduplicates them by event_id)
    possible_duplicates: int = 0
    unsent: int = 0
    unsent_path: Path | None = None
    in_flight: list = field(default_factory=list, repr=False)  # the records of the PutRecords call under way


class SendFailed(ToolError):
    def __init__(self, message: str, result: SendResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class Backoff:
    base_s: float = 0.1
    max_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def wait(self, attempt: int) -> None:
        """Exponential backoff with jitter before attempt `attempt + 1` (attempt counts from 1)."""
        ceiling = min(self.max_s, self.base_s * (2 ** (attempt - 1)))
        self.sleep(ceiling / 2 + self.rng.uniform(0, ceiling / 2))


def send(kinesis, stream_name: str, records: Iterable[Record], *, total: int, max_attempts: int = 5,
         backoff: Backoff | None = None, unsent_path: Path, progress: Progress | None = None) -> SendResult:
    """Send every record; raise SendFailed (after writing `unsent_path`) if some could not be sent or the
    run was interrupted."""
    backoff = backoff or Backoff()
    progress = progress or Progress(total, enabled=False)
    result = SendResult()
    # Built once: on a failure the records not yet tried are the rest of this same generator.
    batch_iter = batches(records)

    def fail(message: str, not_sent: list[Record], detail: str) -> SendFailed:
        count = _write_unsent(unsent_path, not_sent, (r for b in batch_iter for r in b), detail)
        result.unsent, result.unsent_path = count, unsent_path
        progress.finish()
        return SendFailed(
            f"{message}. Sent {result.sent} of {total} records; the {count} not sent are in {unsent_path} "
            f"(resend them with: --dead-letters {unsent_path})",
            result,
        )

    try:
        _send_batches(kinesis, stream_name, batch_iter, result, progress, backoff, max_attempts, fail)
    except KeyboardInterrupt:
        # Ctrl-C: the call in flight may or may not have been written, so its records go to the unsent file
        # marked as such (resending them may duplicate them), with every record not yet tried.
        in_flight = result.in_flight
        raise fail(f"interrupted (Ctrl-C) during PutRecords to {stream_name!r}; the {len(in_flight)} record(s) of "
                   "the call in flight may already be on the stream (resending them may duplicate them)",
                   in_flight, "interrupted_in_flight") from None
    progress.finish()
    return result


def _send_batches(kinesis, stream_name, batch_iter, result, progress, backoff, max_attempts, fail) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    for batch in batch_iter:
        pending = batch
        result.in_flight = pending
        attempt = 1
        while True:
            result.requests += 1
            try:
                response = kinesis.put_records(
                    StreamName=stream_name,
                    Records=[{"Data": r.data, "PartitionKey": r.partition_key} for r in pending],
                )
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code not in RETRYABLE_CALL_ERRORS:
                    raise fail(f"PutRecords to {stream_name!r} refused: {code}: {exc}", pending, code) from None
                if attempt >= max_attempts:
                    raise fail(f"PutRecords to {stream_name!r} still failing after {attempt} attempts ({code})",
                               pending, code) from None
                result.retried += len(pending)
                if code in SERVER_CALL_ERRORS:
                    result.possible_duplicates += len(pending)
                backoff.wait(attempt)
                attempt += 1
                continue
            except BotoCoreError as exc:
                # A timeout or broken connection: the call may have been written; the unsent file says so.
                raise fail(f"PutRecords to {stream_name!r} failed: {exc}; the {len(pending)} record(s) of that call "
                           "may already be on the stream", pending, f"outcome_unknown:{type(exc).__name__}") from None

            failed = [(r, e) for r, e in zip(pending, response["Records"], strict=True) if e.get("ErrorCode")]
            result.sent += len(pending) - len(failed)
            progress.update(result.sent, result.retried)
            if not failed:
                break
            if attempt >= max_attempts:
                codes = sorted({e["ErrorCode"] for _, e in failed})
                raise fail(
                    f"{len(failed)} record(s) still failing after {attempt} PutRecords attempts "
                    f"({', '.join(codes)}); first: {failed[0][0].origin}",
                    [r for r, _ in failed], ",".join(codes),
                )
            pending = [r for r, _ in failed]
            result.in_flight = pending
            result.retried += len(pending)
            backoff.wait(attempt)
            attempt += 1
    result.in_flight = []


def _write_unsent(path: Path, failed: list[Record], rest: Iterator[Record], detail: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for records, why in ((failed, detail), (rest, "not_attempted")):
            for record in records:
                row = {"payload": record.data.decode("utf-8"), "reason": "not_sent", "detail": why,
                       "origin": record.origin, "partition_key": record.partition_key}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return count


def check_all(items: Iterable[tuple[str, bytes]], *, partition_key_field: str | None,
              allow_invalid_json: bool) -> int:
    """First pass: every record is valid and small enough. Returns how many there are."""
    return sum(1 for _ in to_records(items, partition_key_field=partition_key_field,
                                     allow_invalid_json=allow_invalid_json))
