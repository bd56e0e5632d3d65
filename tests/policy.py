"""The rule that no test may skip, as a pytest plugin of its own: tests/conftest.py
uses it, and tests/test_no_skips.py loads it alone in the runs it makes (the conftest's
imports would cost those runs most of their time).

A run with a skipped test fails, so a machine without PostgreSQL, redis-server or npm
cannot pass by leaving their tests out."""

from __future__ import annotations

import pytest

# Tests allowed to skip, by node id, each with its reason. Empty: every test must run.
ALLOWED_SKIPS: dict[str, str] = {}


def _unexpected_skips(stats: dict[str, list]) -> list[pytest.TestReport]:
    return [r for r in stats.get("skipped", []) if r.nodeid not in ALLOWED_SKIPS]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any test skipped (outside ALLOWED_SKIPS), CI or not."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if (
        exitstatus == pytest.ExitCode.OK
        and reporter is not None
        and _unexpected_skips(reporter.stats)
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = _unexpected_skips(terminalreporter.stats)
    if skipped:
        terminalreporter.write_line(
            f"FAILED: {len(skipped)} test(s) skipped; no test may skip "
            "(install what they need: sudo bash .ci/install-services.sh)",
            red=True,
        )
