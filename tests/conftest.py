"""Rules for the whole suite.

A skipped e2e test hides a broken test bed, so it is reported as a failure, and
`--require-e2e` (used by hack/test and CI) fails a run in which no e2e test passed.

Run side by side (`-n N`, pytest-xdist, as hack/test does), each worker has a test bed of its
own: the first keeps the usual folder (`.testbed`, or $KMC_TESTBED_DIR), the others take
`<folder>-gw1`, `<folder>-gw2`…; whole files go to one worker (`--dist loadfile`), so a file's
tests share its bed as they do in a plain run.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

from kmc_testbed import config as bed_config
from tests import bedshot

E2E_DIRS = ("e2e", "faults")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-e2e", action="store_true", help="fail unless at least one e2e test passed"
    )


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and worker != "gw0":
        os.environ["KMC_TESTBED_DIR"] = f"{bed_config.state_dir()}-{worker}"


def _is_e2e(path: Path) -> bool:
    return any(part in E2E_DIRS for part in path.parts)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and _is_e2e(item.path) and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"an e2e test may not skip (skipping counts as failing): {reason}"
    if report.failed and call.when == "call" and _is_e2e(item.path):
        shot = bedshot.snapshot()
        if shot:
            report.sections.append(("test bed at the failure", shot))
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not session.config.getoption("--require-e2e"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    passed = reporter.stats.get("passed", []) if reporter else []
    if not any(_is_e2e(Path(str(r.fspath))) for r in passed):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if reporter:
            reporter.write_line("no e2e test passed: --require-e2e fails this run", red=True)
