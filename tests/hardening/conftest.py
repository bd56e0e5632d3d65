"""Hypothesis profiles for the hardening tests (issue 7).

The profile is applied per test (``@PROFILE``), never loaded globally, so other
tests keep Hypothesis' defaults. ``TICKET_SERVER_HYPOTHESIS_PROFILE`` picks one:

- ``ci`` (default): deterministic (``derandomize``), no example database, enough
  examples that the generated-input tests run several thousand calls in total;
- ``quick``: half of that, for a fast local loop;
- ``deep``: 50 times ``ci`` and randomised, for a hunt by hand.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,
    ],
)
settings.register_profile("ticket-server-ci", max_examples=200, derandomize=True, **_COMMON)
settings.register_profile("ticket-server-quick", max_examples=100, derandomize=True, **_COMMON)
settings.register_profile("ticket-server-deep", max_examples=10_000, derandomize=False, **_COMMON)

PROFILE_NAME = "ticket-server-" + os.environ.get("TICKET_SERVER_HYPOTHESIS_PROFILE", "ci")


def profile(share: float = 1.0) -> settings:
    """The selected profile, with ``share`` of its examples (at least 10)."""
    base = settings.get_profile(PROFILE_NAME)
    return settings(base, max_examples=max(10, int(base.max_examples * share)))
