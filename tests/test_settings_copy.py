"""``Settings.model_copy(update=...)`` (how the CLI and the tests derive settings): what
is derived from ``database_url`` follows the copy's URL, not the original's."""

from __future__ import annotations

from pathlib import Path

from ticket_server.settings import Settings


def test_a_copy_with_another_database_url_derives_from_it(tmp_path: Path) -> None:
    first = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    assert first.sqlite_path == tmp_path / "a.db"  # read once, as a runtime does
    copy = first.model_copy(update={"database_url": f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"})
    assert copy.sqlite_path == tmp_path / "b.db"
    on_postgres = first.model_copy(update={"database_url": "postgresql+asyncpg://u@h/db"})
    assert (on_postgres.is_sqlite, on_postgres.sqlite_path) == (False, None)
