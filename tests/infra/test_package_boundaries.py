"""Package boundaries, read from the source (no import, no Spark): job code runs on Glue and on a laptop
without infra, the project's imports go one way, and the compaction CLI reads the config as infra does."""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable
from pathlib import Path

import pytest

from compaction import __main__ as compaction_cli
from compaction.environments import deep_merge
from infra import config
from infra.config import DEFAULT_CONFIG_PATH, REPO_ROOT, load_config

JOB_PACKAGES = ("glue_jobs", "compaction")
INFRA_PACKAGES = ("infra", "devtools")


def _modules() -> dict[str, Path]:
    """Every module of the project's packages (the top-level folders with an __init__.py) and top-level scripts."""
    modules = {path.stem: path for path in REPO_ROOT.glob("*.py")}
    for init in REPO_ROOT.glob("*/__init__.py"):
        if init.parent.name == "tests":
            continue
        for path in init.parent.rglob("*.py"):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _modules()


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _module_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """The statements that run on import: the module body, into if/try blocks but not `if TYPE_CHECKING:`."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)) and not _is_type_checking(node):
            yield from _module_level(node.body + node.orelse + getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                yield from _module_level(handler.body)


def _imported(module: str, *, module_level_only: bool) -> set[str]:
    """The modules `module` imports (all of them, not only the project's), named as the import names them."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in _module_level(tree.body) if module_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{anchor}.{base}".rstrip(".")
            # `from a import b` imports module a.b when there is one, else takes a name from module a.
            names |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return names


def _graph(*, module_level_only: bool) -> dict[str, set[str]]:
    return {m: {n for n in _imported(m, module_level_only=module_level_only) if n in MODULES and n != m}
            for m in MODULES}


def test_job_code_imports_nothing_from_infra():
    """The job packages ship to Glue as one zip with nothing else (infra/job_assets.py), and the local CLIs run
    without the CDK: not even a function-level import may reach infra or its tools."""
    offending = sorted(
        f"{module} imports {name}"
        for module in MODULES if module.split(".")[0] in JOB_PACKAGES
        for name in _imported(module, module_level_only=False) if name.split(".")[0] in INFRA_PACKAGES
    )
    assert offending == []
    assert {m.split(".")[0] for m in MODULES} >= {*JOB_PACKAGES, *INFRA_PACKAGES}  # the walk found them


def test_modules_import_each_other_without_a_cycle():
    """Module-level imports only: those are the ones a cycle breaks (a half-initialised module)."""
    try:
        order = list(graphlib.TopologicalSorter(_graph(module_level_only=True)).static_order())
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")
    assert "infra.config.model" in order


def test_packages_depend_on_each_other_one_way():
    """Every import, function-level ones too: a package pair that imports both ways cannot be split or shipped alone."""
    packages: dict[str, set[str]] = {}
    for module, imported in _graph(module_level_only=False).items():
        packages.setdefault(module.split(".")[0], set()).update(
            n.split(".")[0] for n in imported if n.split(".")[0] != module.split(".")[0])
    try:
        graphlib.TopologicalSorter(packages).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail(f"package cycle: {' -> '.join(cycle.args[1])}")
    assert "compaction" in packages["infra"]  # infra.monitoring takes compaction's metric names


def test_the_config_package_resolves_the_repository_and_shares_the_merge_with_job_code():
    assert REPO_ROOT == Path(__file__).resolve().parents[2]
    assert DEFAULT_CONFIG_PATH == REPO_ROOT / "config" / "environments.json" == compaction_cli.CONFIG_PATH
    assert config._deep_merge is deep_merge  # one merge rule: the CLI's defaults are the validated config's


@pytest.mark.parametrize("environment", list(load_config().environments))
def test_compaction_cli_defaults_agree_with_the_validated_config(environment):
    c = load_config().get(environment).compaction
    assert compaction_cli._config_defaults(environment, DEFAULT_CONFIG_PATH) == {
        "target_file_mb": c.target_file_mb, "grace_minutes": c.grace_minutes, "lookback_hours": c.lookback_hours,
        "iceberg_snapshot_retention_hours": c.iceberg_snapshot_retention_hours}


# The streaming job's stages, in the order a record passes them, each a folder of glue_jobs (docs/development.md
# "Repository layout"): a stage imports the earlier stages and the foundation (what a dataset is, the session, shared columns and
# constants), never a later stage nor the modules that run the stages (batch, the entrypoints, the runners).
STAGES = ("sources", "decoding", "contract", "lake", "commit")
FOUNDATION = {"glue_jobs.datasets", "glue_jobs.dataset_types", "glue_jobs.dataset_contract", "glue_jobs.schema",
              "glue_jobs.batch_constants", "glue_jobs.column_seq", "glue_jobs.observed", "glue_jobs.session"}


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGES.index(parts[1]) if parts[0] == "glue_jobs" and len(parts) > 1 and parts[1] in STAGES else None


def test_the_job_stages_import_only_earlier_stages_and_the_foundation():
    staged = {m for m in MODULES if _stage(m) is not None}
    assert {m.split(".")[1] for m in staged} == set(STAGES) and len(staged) > 25
    offending = sorted(
        f"{module} ({STAGES[_stage(module)]}) imports {name}"
        for module in staged
        for name in _graph(module_level_only=False)[module]
        if name.startswith("glue_jobs") and name not in FOUNDATION and (_stage(name) is None or _stage(name) > _stage(module))
    )
    assert offending == []
    # the check can fail: a lake module importing the batch runner is caught
    assert "glue_jobs.batch" not in FOUNDATION and _stage("glue_jobs.batch") is None


# A newcomer reads a job module whole: the streaming and compaction jobs keep each module to this many lines.
MAX_JOB_MODULE_LINES = 300


def test_no_job_module_is_longer_than_a_newcomer_reads_at_once():
    lengths = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()
               if name.split(".")[0] in JOB_PACKAGES}
    assert len(lengths) > 20
    assert {name: n for name, n in lengths.items() if n > MAX_JOB_MODULE_LINES} == {}
