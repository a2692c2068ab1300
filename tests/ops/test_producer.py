"""The producer against in-process moto: batching limits, partial-failure retries, refusals, replay."""

from __future__ import annotations

import gzip
import hashlib
import io
import json

import pytest
from botocore.exceptions import ClientError

from operations import producer
from operations.errors import ToolError
from operations.progress import Progress
from tests.ops import moto_dev_env as dev_env


def _lines(n: int, start: int = 0) -> list[str]:
    return [json.dumps({"event_id": f"e{i}", "event_type": "click", "event_time": 1714567200000 + i})
            for i in range(start, start + n)]


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def read_stream(kinesis, stream: str = dev_env.STREAM) -> list[tuple[str, bytes]]:
    """Every record on the stream as (partition key, data), shard by shard."""
    records = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            records += [(r["PartitionKey"], r["Data"]) for r in page["Records"]]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


class FlakyPutRecords:
    """Fault injection on the real moto client: chosen entries fail with an ErrorCode.

    `fail(call_number, record) -> ErrorCode | None`. Failed entries are NOT passed to moto (as on AWS,
    a failed entry is not written); the others are, and the response is stitched in request order.
    """

    def __init__(self, kinesis, fail):
        self.kinesis = kinesis
        self.real = kinesis.put_records
        self.fail = fail
        self.calls: list[list[dict]] = []

    def __call__(self, StreamName, Records):  # noqa: N803 - boto3's parameter names
        call = len(self.calls) + 1
        self.calls.append(Records)
        codes = [self.fail(call, r) for r in Records]
        accepted = [r for r, code in zip(Records, codes, strict=True) if code is None]
        written = iter(self.real(StreamName=StreamName, Records=accepted)["Records"] if accepted else [])
        entries = [next(written) if code is None else {"ErrorCode": code, "ErrorMessage": "injected"}
                   for code in codes]
        return {"FailedRecordCount": sum(c is not None for c in codes), "Records": entries}


def _send(aws, items, tmp_path, **kwargs):
    records = list(producer.to_records(items, partition_key_field="event_id", allow_invalid_json=False))
    kwargs.setdefault("backoff", producer.Backoff(sleep=lambda s: None))
    return producer.send(aws.kinesis, dev_env.STREAM, iter(records), total=len(records),
                         unsent_path=tmp_path / "unsent.jsonl", **kwargs)


def test_every_line_arrives_once_with_its_event_id_as_partition_key(aws, tmp_path):
    path = _write(tmp_path / "events.ndjson", _lines(3))
    result = _send(aws, producer.NdjsonFile(path), tmp_path)

    assert (result.sent, result.requests, result.retried) == (3, 1, 0)
    assert sorted(read_stream(aws.kinesis)) == sorted((f"e{i}", line.encode()) for i, line in enumerate(_lines(3)))


def test_partial_failures_resend_only_the_failed_entries_and_nothing_twice(aws, tmp_path):
    lines = _lines(10)
    failing_first_time = {b'"e2"', b'"e5"', b'"e9"'}
    flaky = FlakyPutRecords(aws.kinesis, lambda call, r: (
        "ProvisionedThroughputExceededException" if call == 1 and any(k in r["Data"] for k in failing_first_time)
        else None))
    aws.kinesis.put_records = flaky

    result = _send(aws, producer.NdjsonFile(_write(tmp_path / "e.ndjson", lines)), tmp_path)

    assert [len(c) for c in flaky.calls] == [10, 3]
    assert [r["PartitionKey"] for r in flaky.calls[1]] == ["e2", "e5", "e9"]
    assert (result.sent, result.retried, result.requests) == (10, 3, 2)
    on_stream = [data for _, data in read_stream(aws.kinesis)]
    assert sorted(on_stream) == sorted(line.encode() for line in lines)  # each exactly once


def test_gives_up_after_max_attempts_and_the_unsent_file_sends_exactly_the_rest(aws, tmp_path):
    lines = _lines(1200)  # three batches: 500, 500, 200
    real_put = aws.kinesis.put_records
    # e7 fails on every attempt: its batch gives up after 3 calls; the second and third batches never go.
    aws.kinesis.put_records = FlakyPutRecords(aws.kinesis, lambda call, r: "InternalFailure" if r["PartitionKey"] == "e7" else None)
    sleeps = []
    with pytest.raises(producer.SendFailed) as failure:
        _send(aws, producer.NdjsonFile(_write(tmp_path / "e.ndjson", lines)), tmp_path, max_attempts=3,
              backoff=producer.Backoff(base_s=0.1, max_s=0.15, sleep=sleeps.append))

    assert "still failing after 3 PutRecords attempts (InternalFailure)" in str(failure.value)
    assert f"{tmp_path / 'unsent.jsonl'}" in str(failure.value)
    assert len(sleeps) == 2 and 0.05 <= sleeps[0] <= 0.1 and 0.075 <= sleeps[1] <= 0.15  # backoff, capped
    unsent = [json.loads(line) for line in (tmp_path / "unsent.jsonl").read_text().splitlines()]
    assert [u["payload"] for u in unsent] == [lines[7]] + lines[500:]
    assert (failure.value.result.sent, failure.value.result.unsent) == (499, 701)

    aws.kinesis.put_records = real_put
    result = _send(aws, producer.DeadLetters(str(tmp_path / "unsent.jsonl")), tmp_path)
    assert result.sent == 701
    assert sorted(d for _, d in read_stream(aws.kinesis)) == sorted(line.encode() for line in lines)


def test_a_throttled_call_is_resent_whole_and_a_refused_call_stops_at_once(aws, tmp_path):
    real_put = aws.kinesis.put_records
    calls = []

    def throttled_once(**kwargs):
        calls.append(len(kwargs["Records"]))
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                              "PutRecords")
        return real_put(**kwargs)

    aws.kinesis.put_records = throttled_once
    result = _send(aws, producer.NdjsonFile(_write(tmp_path / "e.ndjson", _lines(4))), tmp_path)
    assert calls == [4, 4] and result.sent == 4 and len(read_stream(aws.kinesis)) == 4

    aws.kinesis.put_records = real_put
    with pytest.raises(producer.SendFailed, match="refused: ResourceNotFoundException"):
        records = producer.to_records(producer.NdjsonFile(tmp_path / "e.ndjson"), partition_key_field="event_id",
                                      allow_invalid_json=False)
        producer.send(aws.kinesis, "no-such-stream", records, total=4, unsent_path=tmp_path / "u2.jsonl")
    assert len((tmp_path / "u2.jsonl").read_text().splitlines()) == 4


def test_a_server_error_is_resent_and_counted_as_possible_duplicates_a_throttle_is_not(aws, tmp_path):
    """InternalFailureException (Kinesis' modelled 500) may follow a partial write: the resend can duplicate.
    A throttled call was refused whole: its resend duplicates nothing. botocore makes one attempt only
    (operations/aws.py), so every retry is the tool's and is counted."""
    from operations.aws import Clients

    assert Clients(region="eu-west-1").kinesis.meta.config.retries["total_max_attempts"] == 1
    real_put = aws.kinesis.put_records
    errors = iter(["InternalFailureException", "ProvisionedThroughputExceededException"])

    def failing_twice(**kwargs):
        code = next(errors, None)
        if code:
            raise ClientError({"Error": {"Code": code, "Message": "injected"}}, "PutRecords")
        return real_put(**kwargs)

    aws.kinesis.put_records = failing_twice
    result = _send(aws, producer.NdjsonFile(_write(tmp_path / "e.ndjson", _lines(4))), tmp_path)
    assert (result.sent, result.requests, result.retried, result.possible_duplicates) == (4, 3, 8, 4)


def test_ctrl_c_writes_the_in_flight_and_untried_records_to_the_unsent_file(aws, tmp_path):
    """Ctrl-C in the middle of the second of three calls: the first batch is on the stream, the second's
    outcome is unknown (marked so in the unsent file), the third was never tried; nothing is lost."""
    lines = _lines(1200)
    real_put = aws.kinesis.put_records
    calls = []

    def interrupted(**kwargs):
        calls.append(len(kwargs["Records"]))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_put(**kwargs)

    aws.kinesis.put_records = interrupted
    with pytest.raises(producer.SendFailed, match=r"interrupted \(Ctrl-C\).*the 500 record\(s\) of the call in flight may"):
        _send(aws, producer.NdjsonFile(_write(tmp_path / "e.ndjson", lines)), tmp_path)
    unsent = [json.loads(line) for line in (tmp_path / "unsent.jsonl").read_text().splitlines()]
    assert [u["payload"] for u in unsent] == lines[500:]
    assert {u["detail"] for u in unsent[:500]} == {"interrupted_in_flight"}
    assert {u["detail"] for u in unsent[500:]} == {"not_attempted"}
    assert len(read_stream(aws.kinesis)) == 500


def test_batches_hold_at_most_500_records_and_5_mib():
    def record(i, size):
        return producer.Record(f"line {i}", b"x" * size, "k")

    small = list(producer.batches(record(i, 10) for i in range(1201)))
    assert [len(b) for b in small] == [500, 500, 201]

    big = list(producer.batches(record(i, 700_000) for i in range(16)))  # 7 fit in 5 MiB, 8 do not
    assert [len(b) for b in big] == [7, 7, 2]
    assert all(sum(r.size for r in b) <= producer.MAX_REQUEST_BYTES for b in big)

    exact = list(producer.batches(record(i, producer.MAX_REQUEST_BYTES // 5 - 1) for i in range(6)))
    assert [len(b) for b in exact] == [5, 1]


def test_large_records_are_sent_in_requests_within_the_limits(aws, tmp_path):
    lines = [json.dumps({"event_id": f"big{i}", "metadata": "m" * 900_000}) for i in range(7)]
    flaky = FlakyPutRecords(aws.kinesis, lambda call, r: None)
    aws.kinesis.put_records = flaky

    result = _send(aws, producer.NdjsonFile(_write(tmp_path / "big.ndjson", lines)), tmp_path)

    assert result.sent == 7
    assert [len(c) for c in flaky.calls] == [5, 2]
    assert all(sum(len(r["Data"]) + len(r["PartitionKey"]) for r in c) <= 5 * 1024 * 1024 for c in flaky.calls)
    assert len(read_stream(aws.kinesis)) == 7


def test_a_record_over_1_mib_is_refused_naming_its_line_and_nothing_is_sent(aws, tmp_path):
    lines = _lines(2) + [json.dumps({"event_id": "huge", "metadata": "m" * (1024 * 1024)})] + _lines(1, 5)
    path = _write(tmp_path / "e.ndjson", lines)

    with pytest.raises(ToolError, match=r"e\.ndjson line 3: record is \d+ bytes .* at most 1048576 bytes \(1 MiB\)"):
        producer.check_all(producer.NdjsonFile(path), partition_key_field="event_id", allow_invalid_json=False)
    assert read_stream(aws.kinesis) == []


def test_the_partition_key_size_counts_towards_the_1_mib(tmp_path):
    data = json.dumps({"event_id": "k" * 200, "pad": ""})
    data = data.replace('"pad": ""', '"pad": "' + "p" * (1024 * 1024 - len(data) - 100) + '"')
    assert len(data) < 1024 * 1024 < len(data) + 200  # fits alone, not with its 200-char key
    path = _write(tmp_path / "e.ndjson", [data])
    with pytest.raises(ToolError, match="line 1: record is 1048676 bytes with its partition key"):
        producer.check_all(producer.NdjsonFile(path), partition_key_field="event_id", allow_invalid_json=False)


def test_partition_key_falls_back_to_the_md5_of_the_record():
    line = b'{"event_type": "click"}'
    assert producer.partition_key_for(line, json.loads(line), "event_id") == hashlib.md5(line).hexdigest()
    assert producer.partition_key_for(b'{"user_id": 42}', {"user_id": 42}, "user_id") == "42"
    assert producer.partition_key_for(b'{"event_id": ""}', {"event_id": ""}, "event_id") == hashlib.md5(
        b'{"event_id": ""}').hexdigest()
    assert producer.partition_key_for(b"[1]", [1], "event_id") == hashlib.md5(b"[1]").hexdigest()
    long_id = {"event_id": "x" * 257}
    assert len(producer.partition_key_for(b"l", long_id, "event_id")) == 32


def test_invalid_json_is_refused_naming_the_line_unless_allowed(tmp_path):
    path = _write(tmp_path / "e.ndjson", ['{"event_id": "a"}', "", '{"event_id": broken'])
    with pytest.raises(ToolError, match=r"e\.ndjson line 3: not valid JSON .*--allow-invalid-json"):
        producer.check_all(producer.NdjsonFile(path), partition_key_field="event_id", allow_invalid_json=False)
    assert producer.check_all(producer.NdjsonFile(path), partition_key_field="event_id", allow_invalid_json=True) == 2


def test_dead_letters_replay_from_s3_skips_hidden_files_and_filters_reasons(aws, tmp_path):
    fixed = [json.dumps({"event_id": "fixed1", "event_type": "click", "event_time": 1714567200000}),
             json.dumps({"event_id": "fixed2", "event_type": "view", "event_time": 1714567200001})]
    rows = [{"payload": fixed[0], "reason": "invalid_type"}, {"payload": fixed[1], "reason": "out_of_range"},
            {"payload": '{"event_id": "still-bad"', "reason": "malformed_json"}]
    body = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode())
    prefix = "dead_letters/clickstream/ingest_date=2024-05-01"
    aws.s3.put_object(Bucket=dev_env.DEAD_LETTER_BUCKET, Key=f"{prefix}/part-0.jsonl.gz", Body=body)
    aws.s3.put_object(Bucket=dev_env.DEAD_LETTER_BUCKET, Key=f"{prefix}/_temporary/part-9.jsonl",
                      Body=json.dumps({"payload": '{"event_id": "staged"}', "reason": "invalid_type"}).encode())

    letters = producer.DeadLetters(f"{dev_env.DEAD_LETTER_PATH}/ingest_date=2024-05-01/",
                                   ("invalid_type", "out_of_range"), s3=aws.s3)
    result = _send(aws, letters, tmp_path)

    assert result.sent == 2
    assert sorted(read_stream(aws.kinesis)) == [("fixed1", fixed[0].encode()), ("fixed2", fixed[1].encode())]


@pytest.mark.e2e  # starts a JVM (~10-15 s): Spark reads the Parquet dead letters, as pyarrow is no dependency
def test_dead_letters_replay_reads_parquet_written_by_spark(aws, tmp_path):
    from tests.spark_session import shared_spark_session

    spark = shared_spark_session()  # the same session as tests/spark's, whichever starts the JVM first
    payloads = [json.dumps({"event_id": f"p{i}", "event_type": "click", "event_time": 1714567200000}) for i in range(3)]
    frame = spark.createDataFrame([(p, "invalid_type") for p in payloads] + [("{bad", "malformed_json")],
                                  "payload string, reason string")
    out = tmp_path / "dead_letters" / "clickstream" / "ingest_date=2024-05-01"
    frame.coalesce(1).write.parquet(str(out))  # also leaves _SUCCESS and .crc files, which are skipped

    result = _send(aws, producer.DeadLetters(str(tmp_path / "dead_letters"), ("invalid_type",)), tmp_path)

    assert result.sent == 3
    assert sorted(d for _, d in read_stream(aws.kinesis)) == sorted(p.encode() for p in payloads)


def test_parquet_dead_letters_without_pyspark_are_an_error_line_and_nothing_is_sent(aws, tmp_path, monkeypatch):
    """requirements.txt (the tools' requirements) has no Spark: Parquet needs the development environment."""
    import sys

    monkeypatch.setitem(sys.modules, "pyspark.sql", None)  # `from pyspark.sql import ...` raises ImportError
    folder = tmp_path / "dead_letters" / "clickstream" / "ingest_date=2024-05-01"
    folder.mkdir(parents=True)
    _write(folder / "a.jsonl", [json.dumps({"payload": _lines(1)[0], "reason": "invalid_type"})])
    (folder / "part-0.parquet").write_bytes(b"PAR1")
    with pytest.raises(ToolError, match=r"1 of the dead-letter files are Parquet .*part-0.parquet.*needs pyspark.*Nothing was sent"):
        _send(aws, producer.DeadLetters(str(tmp_path / "dead_letters"), ()), tmp_path)
    assert read_stream(aws.kinesis) == []


def test_progress_goes_to_stderr_in_tenths_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(1000, stream=stream)
    for done in range(0, 1001, 100):
        progress.update(done, retried=3 if done == 1000 else 0)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[-1] == "[##############################] 1000/1000 records (100%), 3 retried"


def test_replaying_a_source_sends_none_of_another_source_whose_name_it_begins(aws, tmp_path):
    """`dead_letters/orders` is a folder: `dead_letters/orders-eu/` holds another source's dead letters."""
    ours = json.dumps({"event_id": "orders-1", "event_type": "purchase", "event_time": 1714567200000})
    theirs = json.dumps({"event_id": "eu-1", "event_type": "purchase", "event_time": 1714567200000})
    for source, payload in (("orders", ours), ("orders-eu", theirs)):
        aws.s3.put_object(Bucket=dev_env.DEAD_LETTER_BUCKET, Key=f"dead_letters/{source}/ingest_date=2024-05-01/part-0.jsonl",
                          Body=(json.dumps({"payload": payload, "reason": "invalid_type"}) + "\n").encode())
    letters = producer.DeadLetters(f"s3://{dev_env.DEAD_LETTER_BUCKET}/dead_letters/orders", ("invalid_type",), s3=aws.s3)
    result = _send(aws, letters, tmp_path)
    assert result.sent == 1
    assert read_stream(aws.kinesis) == [("orders-1", ours.encode())]


def test_the_md5_fallback_works_on_a_fips_python(monkeypatch):
    """A FIPS build of Python refuses md5 unless the caller says it is not for security."""
    real_md5 = hashlib.md5

    def fips_md5(data=b"", *, usedforsecurity=True):
        if usedforsecurity:
            raise ValueError("[digital envelope routines] unsupported")
        return real_md5(data, usedforsecurity=False)

    monkeypatch.setattr(hashlib, "md5", fips_md5)
    assert producer.partition_key_for(b"x", None, None) == real_md5(b"x").hexdigest()
