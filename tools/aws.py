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

# Adaptive retries for throttled control-plane calls; the producer does its own per-record retries
# on top (PutRecords reports partial failures in a 200 response, which botocore never retries).
_CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})


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
            kwargs: dict[str, Any] = {"config": _CLIENT_CONFIG}
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
