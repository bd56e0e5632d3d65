"""The suite cannot go green by skipping: tests/policy.py (used by tests/conftest.py) fails a
run with any skip."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_with_a_skipped_test_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    """A run whose only non-passing test skipped (as one would without PostgreSQL,
    redis-server or npm) exits non-zero and says why; the same run without it passes.
    Also with the worker processes `make test` uses (pytest-xdist)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(
        test_probe="""
import pytest

def test_passes():
    assert True

def test_needs_a_service():
    pytest.skip("redis-server is not installed")
"""
    )
    skipped = pytester.runpytest_subprocess(
        "-p", "tests.policy", "-p", "no:cacheprovider", *workers
    )
    skipped.assert_outcomes(passed=1, skipped=1)
    assert skipped.ret == pytest.ExitCode.TESTS_FAILED
    skipped.stdout.fnmatch_lines(["*1 test(s) skipped; no test may skip*"])

    clean = pytester.runpytest_subprocess(
        "-p", "tests.policy", "-p", "no:cacheprovider", "-k", "passes", *workers
    )
    assert clean.ret == pytest.ExitCode.OK
