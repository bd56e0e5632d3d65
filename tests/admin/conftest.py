"""Tests of the operator commands (ticket_server/admin): the tool contract, export,
probe and usage reports, each run as the operator runs it."""

from tests.access.conftest import add_caller  # noqa: F401  (fixture: a caller in the test database)
from tests.transports.conftest import http_server  # noqa: F401  (fixture: a real HTTP server)
