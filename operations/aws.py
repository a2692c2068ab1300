"""boto3 clients for the tools, created once per command from one session.

The endpoint is boto3's own setting: `AWS_ENDPOINT_URL` (all services) or
`AWS_ENDPOINT_URL_<SERVICE>` in the environment, or `--endpoint-url` on the command line. Tests
point it at a moto server; nothing else in the tools knows about endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

# botocore's "standard" retry mode (not "adaptive"): up to 5 attempts in all of a call that failed with a
# throttling error, a 5xx or a connection error, with backoff. Right for the control-plane calls
# (Glue, CloudFormation, CloudWatch, S3 reads). `total_max_attempts` counts the first attempt; the
# retries dict's `max_attempts` would count retries only (5 meant 6 calls).
_CLIENT_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 5})
# Kinesis is used for PutRecords only, and the producer retries it itself (operations/producer.py): botocore
# would resend a call that failed with a 5xx after the service may already have written part of it,
# invisibly, so a possible duplicate could not be counted. One attempt here; every retry is the tool's.
_DATA_PLANE_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1})
_CONFIGS = {"kinesis": _DATA_PLANE_CONFIG}


@dataclass
class Clients:
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    session: Any = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.session is None:
            self.session = boto3.session.Session(profile_name=self.profile, region_name=self.region)

    def client(self, service: str):
        if service not in self._cache:
            kwargs: dict[str, Any] = {"config": _CONFIGS.get(service, _CLIENT_CONFIG)}
            if self.endpoint_url:
                kwargs["endpoint_url"] = self.endpoint_url
            self._cache[service] = self.session.client(service, **kwargs)
        return self._cache[service]

    @property
    def kinesis(self):
        return self.client("kinesis")

    @property
    def glue(self):
        return self.client("glue")

    @property
    def s3(self):
        return self.client("s3")

    @property
    def cloudwatch(self):
        return self.client("cloudwatch")

    @property
    def cloudformation(self):
        return self.client("cloudformation")
