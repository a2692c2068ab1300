"""The job code as deployed: entrypoint scripts plus one zip of the shared packages.

Glue's --extra-py-files takes a .zip whose top level holds the packages, and the Glue L2 `Code`
accepts files only, so the zip is built here, reproducibly: sorted entries, a fixed timestamp and
mode, no compression (zlib output can differ between machines). The asset hash, and with it the
template, therefore changes exactly when deployed code changes.

Only job code ships: the modules the entrypoints import and the dataset files they read (clickstream's
schema versions included: glue_jobs/schema.py reads them from datasets/clickstream/). The local tools
(command lines, the local runner, the event generator) stay out, and so does anything outside the two
packages and datasets/: the zip is imported in place, so nothing in it may depend on the repository
layout (tests/infra/test_rehearsal.py imports it with no repository on the path).

    glue_jobs/...
    compaction/...
    datasets/<name>/   (dataset.json, schemas.lock.json, schema.v<N>.avsc: what glue_jobs.datasets reads)
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.config import REPO_ROOT

GLUE_VERSIONS = {"4.0": glue.GlueVersion.V4_0, "5.0": glue.GlueVersion.V5_0, "5.1": glue.GlueVersion.V5_1,
                 "6.0": glue.GlueVersion.V6_0}
WORKER_TYPES = {"G.025X": glue.WorkerType.G_025X, "G.1X": glue.WorkerType.G_1X, "G.2X": glue.WorkerType.G_2X}

PACKAGES = ("glue_jobs", "compaction")
PACKAGE_DATA = ("*.py",)
# Not job code: the entrypoint scripts (uploaded as the job's script), the command lines and local tools.
LOCAL_ONLY = frozenset({
    "glue_jobs/__main__.py", "glue_jobs/glue_entry.py", "glue_jobs/generate.py", "glue_jobs/local_runner.py",
    "glue_jobs/local_kafka.py", "glue_jobs/dataset_generate.py", "glue_jobs/generate_command.py",
    "compaction/__main__.py", "compaction/glue_entry.py", "compaction/environments.py",
})
PACKAGE_ZIP = REPO_ROOT / "build" / "glue_package.zip"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def _entries() -> list[tuple[str, Path]]:
    entries = []
    for package in PACKAGES:
        for pattern in PACKAGE_DATA:
            for path in (REPO_ROOT / package).rglob(pattern):  # with the stage folders (glue_jobs/sources/, ...)
                name = path.relative_to(REPO_ROOT).as_posix()
                if name not in LOCAL_ONLY:
                    entries.append((name, path))
    entries += _dataset_entries()
    return sorted(entries)


def _dataset_entries() -> list[tuple[str, Path]]:
    """Every dataset's files, under `datasets/` beside the packages: glue_jobs.datasets reads them from there in
    the zip as in the source tree (and glue_jobs.schema clickstream's, through it). Loading them first refuses a
    bad dataset before anything is packaged."""
    from glue_jobs import datasets

    root = Path(str(datasets.root()))
    entries = []
    for name, dataset in datasets.load_all().items():
        files = ["dataset.json", datasets.LOCK_FILE, *(f"schema.v{v}.avsc" for v in dataset.versions)]
        entries += [(f"datasets/{name}/{file}", root / name / file) for file in files]
    return entries


def build_package_zip(target: Path = PACKAGE_ZIP) -> Path:
    """Write the package zip (byte-identical for identical sources) and return its path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".zip.{os.getpid()}.tmp")  # two synths at once (tests, a shell) never share it
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, path in _entries():
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    tmp.replace(target)
    return target


def functions_jar(scope: Construct) -> glue.Code:
    """The project's JVM functions (jvm/glue-functions, built by infra/jvm_functions.py: javac --release 8) as an
    asset the job role may read; for `extra_jars` (Glue's --extra-jars)."""
    from infra import jvm_functions

    return AssetObjectCode(s3_assets.Asset(scope, "FunctionsJarAsset", path=str(jvm_functions.jar_path())))


def entrypoint(package: str, module: str = "glue_entry") -> Path:
    path = REPO_ROOT / package / f"{module}.py"
    if not path.exists():
        raise FileNotFoundError(f"Glue entrypoint {path} is missing")
    return path


class AssetObjectCode(glue.Code):
    """Job code uploaded as a CDK asset, readable by the job role as that one object.

    `glue.Code.from_asset` grants the role the S3 read helper (s3:GetObject*, s3:GetBucket*, s3:List*) on
    the whole bootstrap asset bucket, i.e. on every asset of every CDK app in the account and region.
    Glue loads the script and --extra-py-files objects with the job role; reading an object takes
    s3:GetObject on it, so that is the grant.
    """

    def __init__(self, asset: s3_assets.Asset) -> None:
        super().__init__()
        self._asset = asset

    def bind(self, scope: Construct, grantable: iam.IGrantable) -> glue.CodeConfig:
        grantable.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self._asset.bucket.arn_for_objects(self._asset.s3_object_key)])
        )
        return glue.CodeConfig(
            s3_location=s3.Location(bucket_name=self._asset.s3_bucket_name, object_key=self._asset.s3_object_key)
        )


def common_job_props(
    scope: Construct,
    package: str,
    *,
    glue_version: str,
    worker_type: str,
    workers: int,
    security_configuration: glue.ISecurityConfiguration,
    logging=None,
) -> dict:
    """What every job of this app shares: its entrypoint and the package zip (as assets under `scope`),
    runtime and workers, encryption, continuous logging, metrics and observability metrics, one run at a time."""
    script = s3_assets.Asset(scope, "ScriptAsset", path=str(entrypoint(package)))
    package_zip = s3_assets.Asset(scope, "PackageAsset", path=str(build_package_zip()))
    return {
        "script": AssetObjectCode(script),
        "extra_python_files": [AssetObjectCode(package_zip)],
        "glue_version": GLUE_VERSIONS[glue_version],
        "worker_configuration": glue.WorkerConfiguration(worker_type=WORKER_TYPES[worker_type], number_of_workers=workers),
        "security_configuration": security_configuration,
        # In the stack's own log groups (infra/glue_security.GlueJobSecurity.job_logging) when given.
        "continuous_logging": logging.continuous_logging if logging else glue.ContinuousLoggingProps(enabled=True),
        "enable_metrics": True,
        "enable_observability_metrics": True,
        "max_concurrent_runs": 1,
    }
