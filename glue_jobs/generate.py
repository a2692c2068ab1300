"""Realistic NDJSON sample data, with bad records of every kind and in-file duplicates.

Used by the tests, `make demo` and the benchmark. Deterministic for a given seed and base time.
Duplicates repeat an earlier valid record's event_id in the same file (so they meet in one micro-batch);
the first occurrence (lowest line) is the one the job keeps.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

EVENT_TYPES = ("page_view", "click", "add_to_cart", "checkout", "purchase", "search", "login", "logout")
CURRENCIES = ("EUR", "USD", "GBP", "JPY")
HOUR_MS = 3_600_000

# (reason the job must give, how to spoil a valid record); every reason code has several kinds.
BAD_KINDS: tuple[tuple[str, str], ...] = (
    ("malformed_json", "truncated"),
    ("malformed_json", "not_json"),
    ("malformed_json", "bare_nan"),
    ("malformed_json", "array"),
    ("missing_required_field", "no_event_id"),
    ("missing_required_field", "empty_event_type"),
    ("missing_required_field", "null_event_time"),
    ("invalid_type", "string_amount"),
    ("invalid_type", "numeric_user_id"),
    ("invalid_type", "float_event_time"),
    ("invalid_type", "string_event_time"),
    ("out_of_range", "before_2000"),
    ("out_of_range", "far_future"),
    ("out_of_range", "amount_overflow"),
)


@dataclass
class Expectation:
    valid_event_ids: list[str] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)
    bad_by_reason: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    records: int = 0
    files: int = 0
    shapes: dict[str, int] = field(default_factory=dict)  # valid records per PRODUCER_SHAPES name (shape "producers")


def _record(rng: random.Random, n: int, base_ms: int, span_hours: int = 48) -> dict:
    record = {
        "event_id": f"evt-{n:09d}-{rng.randrange(16**6):06x}",
        "event_type": rng.choice(EVENT_TYPES) if rng.random() < 0.9 else f" {rng.choice(EVENT_TYPES).upper()} ",
        "event_time": base_ms - rng.randrange(span_hours * HOUR_MS),
        "user_id": f"u-{rng.randrange(100_000)}",
    }
    if rng.random() < 0.6:
        record["amount"] = round(rng.uniform(0.5, 500), 2)
        record["currency"] = rng.choice(CURRENCIES)
    if rng.random() < 0.5:
        record["metadata"] = {"page": f"/p/{rng.randrange(1000)}", "ab": rng.random() < 0.5}
    elif rng.random() < 0.1:
        record["metadata"] = "free text note"
    return record


# The shapes `generate(shape="producers")` gives valid records, each with its share (docs/performance.md, "Records shaped
# like producers'"): what real producers send and the generated shape does not. A record may carry several.
PRODUCER_SHAPES: tuple[tuple[str, float], ...] = (
    ("escapes", 0.10),  # a \", \n or \u00e9 escape in a string value
    ("non_ascii", 0.10),  # text outside ASCII written as UTF-8 (é, ü, 東京, an emoji)
    ("case_variant", 0.15),  # an event_type in another case or padded, which normalize folds
    ("json_text_array", 0.05),  # metadata an array (objects and plain strings are in the generated shape already)
    ("integer_amount", 0.15),  # an amount written as an integer where the schema declares a double
    ("explicit_null", 0.15),  # an optional field sent as null rather than left out
)
_NON_ASCII = ("Café Crème", "Müller-Lüdenscheid", "東京", "São Paulo 🎉", "naïve résumé")


def _producer_record(rng: random.Random, n: int, base_ms: int, span_hours: int) -> tuple[dict, list[str]]:
    """A valid record shaped like a producer's (PRODUCER_SHAPES) and the shapes it carries."""
    record, shapes = _record(rng, n, base_ms, span_hours), []
    roll = {name: rng.random() < share for name, share in PRODUCER_SHAPES}
    if roll["escapes"]:
        record["metadata"] = {"query": rng.choice(('say "hi"', "line one\nline two", "tab\there")), "ab": True}
        record["user_id"] = f"u-{rng.randrange(100_000)}-é"  # written \u00e9 by json.dumps(ensure_ascii=True)
        shapes.append("escapes")
    elif roll["non_ascii"]:
        record["metadata"] = {"page": f"/p/{rng.choice(_NON_ASCII)}", "ab": False}
        shapes.append("non_ascii")
    elif roll["json_text_array"]:
        record["metadata"] = [rng.randrange(100), "tag", {"nested": True}]
        shapes.append("json_text_array")
    if roll["case_variant"]:
        record["event_type"] = rng.choice((str.upper, str.title, lambda t: f" {t} "))(rng.choice(EVENT_TYPES))
        shapes.append("case_variant")
    if roll["integer_amount"]:
        record["amount"], record["currency"] = rng.randrange(1, 500), rng.choice(CURRENCIES)
        shapes.append("integer_amount")
    if roll["explicit_null"]:
        record[rng.choice(("user_id", "amount", "currency", "metadata"))] = None
        shapes.append("explicit_null")
    return record, shapes


def _spoil(kind: str, record: dict, base_ms: int) -> str:
    r = dict(record)
    if kind == "truncated":
        return json.dumps(r)[:-7]
    if kind == "not_json":
        return f"event {r['event_id']} at {r['event_time']}"
    if kind == "bare_nan":
        return json.dumps({**r, "amount": float("nan")})  # Python writes NaN, which is not JSON
    if kind == "array":
        return json.dumps([r])
    if kind == "no_event_id":
        del r["event_id"]
    elif kind == "empty_event_type":
        r["event_type"] = "  "
    elif kind == "null_event_time":
        r["event_time"] = None
    elif kind == "string_amount":
        r["amount"] = "12.50"
    elif kind == "numeric_user_id":
        r["user_id"] = 12345
    elif kind == "float_event_time":
        r["event_time"] = r["event_time"] + 0.5
    elif kind == "string_event_time":
        r["event_time"] = str(r["event_time"])
    elif kind == "before_2000":
        r["event_time"] = 915_148_800_000  # 1999-01-01
    elif kind == "far_future":
        r["event_time"] = base_ms + 30 * 24 * HOUR_MS
    elif kind == "amount_overflow":
        r.pop("amount", None)
        return json.dumps(r)[:-1] + ', "amount": 1e400}'
    return json.dumps(r)


SHAPES = ("generated", "producers")


def generate(out_dir: str | Path, *, records: int, files: int = 10, bad_ratio: float = 0.01,
             duplicate_ratio: float = 0.005, seed: int = 7, base_time_ms: int | None = None,
             span_hours: int = 48, shape: str = "generated") -> Expectation:
    """Write `files` NDJSON files totalling `records` lines into out_dir; return what the job must make of them.
    Event times fall in the `span_hours` hours before the base time (49 hour partitions by default; a backfill
    after an outage spans more). `shape` "producers": valid records also carry PRODUCER_SHAPES (Expectation.shapes
    counts them), half of them written with non-ASCII as \\u escapes, half as UTF-8."""
    if records < 0 or files < 1 or not 0 <= bad_ratio <= 1 or not 0 <= duplicate_ratio <= 1 or span_hours < 1:
        raise ValueError("records >= 0, files >= 1, ratios within 0..1, span_hours >= 1")
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: expected one of {', '.join(SHAPES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    base_ms = int(time.time() * 1000) if base_time_ms is None else base_time_ms
    expect = Expectation(records=records, files=files)
    n = 0
    for index in range(files):
        count = records // files + (1 if index < records % files else 0)
        lines: list[str] = []
        valid_in_file: list[str] = []
        for _ in range(count):
            if shape == "producers":
                record, shapes = _producer_record(rng, n, base_ms, span_hours)
            else:
                record, shapes = _record(rng, n, base_ms, span_hours), []
            n += 1
            roll = rng.random()
            if roll < bad_ratio:
                reason, kind = BAD_KINDS[rng.randrange(len(BAD_KINDS))]
                line = _spoil(kind, record, base_ms)
                expect.bad_lines.append(line)
                expect.bad_by_reason[reason] = expect.bad_by_reason.get(reason, 0) + 1
            elif roll < bad_ratio + duplicate_ratio and valid_in_file:
                line = valid_in_file[rng.randrange(len(valid_in_file))]
                expect.duplicates += 1
            else:
                ascii_only = shape == "generated" or rng.random() < 0.5
                line = json.dumps(record, separators=(",", ":") if rng.random() < 0.5 else (", ", ": "), ensure_ascii=ascii_only)
                valid_in_file.append(line)
                for name in shapes:
                    expect.shapes[name] = expect.shapes.get(name, 0) + 1
                expect.valid_event_ids.append(record["event_id"])
            lines.append(line)
        (out / f"events-{index:05d}.json").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return expect
