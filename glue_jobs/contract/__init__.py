"""What every dataset's contract returns (glue_jobs/contract/typed_contract.py validates; glue_jobs/lake/lake_layout.py adds
what the batch knows): the reason codes of a dead letter, and the columns validate() returns besides the
dataset's fields.

Reason codes, first match wins (malformed_json, unknown_field, missing_required_field, invalid_type, out_of_range); `detail`
names the first offending field path in schema order. A framed Kafka value adds two (malformed_record,
unknown_schema_version: glue_jobs/decoding/registry_frames.py).
"""

from __future__ import annotations

from glue_jobs.decoding.registry_frames import MALFORMED_RECORD, UNKNOWN_SCHEMA_VERSION
from glue_jobs.schema import INGESTION_COLUMNS

MALFORMED_JSON = "malformed_json"
MISSING_REQUIRED_FIELD = "missing_required_field"
INVALID_TYPE = "invalid_type"
OUT_OF_RANGE = "out_of_range"
UNKNOWN_FIELD = "unknown_field"  # dataset.json unknown_fields: reject (glue_jobs/contract/unknown_fields.py)
UNWRITABLE = "unwritable"  # a valid record no lake write takes (glue_jobs/lake/unwritable.py): found after the write, not here
# New codes go last: a code's position is its number in the batch cache (glue_jobs/lake/packed_batch.py).
REASON_CODES = (MALFORMED_JSON, MISSING_REQUIRED_FIELD, INVALID_TYPE, OUT_OF_RANGE, MALFORMED_RECORD, UNKNOWN_SCHEMA_VERSION,
                UNKNOWN_FIELD, UNWRITABLE)

# What validate() returns besides the dataset's fields: the ingestion columns the envelope carries (the
# lake's INGESTION_COLUMNS but batch_id, which the write adds), then the verdict and the record's text.
VALIDATED_INGESTION_COLUMNS = ("source", "source_partition", "source_offset", "arrival_time")
if VALIDATED_INGESTION_COLUMNS != tuple(name for name, _, _ in INGESTION_COLUMNS if name != "batch_id"):
    raise AssertionError("VALIDATED_INGESTION_COLUMNS drifted from glue_jobs.schema.INGESTION_COLUMNS")
VALIDATED_EXTRA_COLUMNS = ("reason", "detail", "payload")
# Before them, for a dataset that keeps or drops unknown fields: how many a valid record had (null: none).
UNKNOWN_COUNT = "_unknown_count"
# Before them, where the source decoded the bytes before the job (Kinesis): 1 for a payload holding U+FFFD, else null.
REPLACEMENTS = "_replacements"
# Validated columns whose non-null rows a batch counts (glue_jobs/lake/packed_batch.py), by the BatchStats field they fill.
COUNTED = {UNKNOWN_COUNT: "unknown_fields", REPLACEMENTS: "replacement_characters"}
