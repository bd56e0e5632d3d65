"""Alembic migrations, shipped in the package as ``ticket_server.migrations``.

``HEAD`` is the newest revision: a serving process compares the database's revision with
it without loading Alembic, which it would otherwise keep resident for one look at the
scripts. ``tests/test_migrations.py`` fails when it is not Alembic's own head, so a new
revision updates it.
"""

HEAD = "0026_ticket_counts"
