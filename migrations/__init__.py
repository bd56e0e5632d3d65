"""Alembic migrations, shipped in the package as ``ticket_server.migrations``."""
