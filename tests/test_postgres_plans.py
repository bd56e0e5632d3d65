"""Query plans on PostgreSQL: the indexes the migrations create are the ones the
server's own queries use (read from auto_explain's log of the statements it runs)."""

from __future__ import annotations

import pytest
from fastmcp import Client

from tests.postgres import PostgresServer, server_at
from ticket_server.server import build_server
from ticket_server.settings import Settings

pytestmark = pytest.mark.postgresql_only


def explain_everything(postgres: PostgresServer, database_url: str) -> None:
    """Every later session in this database logs the plan of each statement it runs."""
    _, name = server_at(database_url)
    for setting in (
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        # The 2,400-ticket sample is small enough that a sequential scan is the
        # cheapest plan; forbidding it asks whether the index can serve the
        # server's query at all (the expression and operator class match), which
        # is what a change to the query or the migration would break.
        "enable_seqscan = off",
    ):
        postgres.psql(f"ALTER DATABASE {name} SET {setting}")


async def test_deprecated_search_uses_the_trigram_index(
    postgres: PostgresServer, database_url: str
) -> None:
    """search_tickets (deprecated) finds subjects containing a rare query (a pasted
    invoice number) through the pg_trgm GIN index on lower(subject)
    (ix_tickets_subject_trgm, migration 0002). A frequent word is left to the planner:
    walking the newest tickets until `limit` match can be cheaper than the index."""
    assert postgres.data_dir is not None, (
        "reads the plans from the tests' own PostgreSQL server log"
    )
    explain_everything(postgres, database_url)
    log = postgres.data_dir / "server.log"
    start = log.stat().st_size
    async with Client(build_server(Settings(database_url=database_url)), mode="legacy") as client:
        result = await client.call_tool("search_tickets", {"query": "INV-20931"})
    assert result.is_error is False and result.structured_content["result"], result
    with log.open("rb") as f:
        f.seek(start)
        plans = f.read().decode(errors="replace")
    searches = [
        block for block in plans.split(" LOG:  ") if "FROM tickets" in block and "subject" in block
    ]
    assert len(searches) == 1, plans[-3000:]
    assert "ix_tickets_subject_trgm" in searches[0], (
        f"the substring search does not use the trigram index:\n{searches[0]}"
    )


async def test_every_word_search_looks_postings_up_row_by_row(
    postgres: PostgresServer, database_url: str
) -> None:
    """A search of several words intersects (token, impact) lists of search postings by
    reading one list newest first and looking the others up by primary key, row by row
    (``tickets.search._looked_up``: EXISTS ... OFFSET 0). Without the OFFSET, PostgreSQL
    turns each EXISTS into a join planned from its estimates of the lists' lengths, and
    chose to merge whole long lists; a planner that stops honouring the OFFSET fails here."""
    assert postgres.data_dir is not None, (
        "reads the plans from the tests' own PostgreSQL server log"
    )
    explain_everything(postgres, database_url)
    log = postgres.data_dir / "server.log"
    start = log.stat().st_size
    async with Client(build_server(Settings(database_url=database_url))) as client:
        result = await client.call_tool("search_tickets_v2", {"query": "webhook signature failing"})
    assert result.is_error is False and result.structured_content["tickets"], result
    with log.open("rb") as f:
        f.seek(start)
        plans = f.read().decode(errors="replace")
    groups = [
        block for block in plans.split(" LOG:  ") if "FROM ticket_search_postings AS drive" in block
    ]
    assert groups, plans[-3000:]
    for plan in groups:
        assert "SubPlan" in plan and "Join" not in plan, (
            f"a group of postings is not looked up row by row:\n{plan}"
        )


async def test_long_lists_of_postings_are_joined_with_the_planners_own_settings(
    postgres: PostgresServer,
    database_url: str,
) -> None:
    """Groups whose lists of postings are all long (here: longer than 4) are read as a
    join of the lists (``tickets.search._join_statement``) planned with PostgreSQL's own
    settings: no statement of the search switches a planner setting (issue 37: at 1M the
    default plan serves the target, bench/ANALYSIS.md), and the session's settings are
    those it had before."""
    from ticket_server import db
    from ticket_server.tickets.models import Ticket
    from ticket_server.tickets.search import SearchFilters, analyze_query, every_word_page

    explain_everything(postgres, database_url)
    log = postgres.data_dir / "server.log"
    start = log.stat().st_size
    settings = (
        "SELECT current_setting('enable_nestloop'), current_setting('enable_hashjoin'), "
        "current_setting('max_parallel_workers_per_gather')"
    )

    def search(conn) -> tuple[list, list]:
        words = analyze_query(conn, "password reset").words
        page = every_word_page(
            conn, "postgresql", [Ticket.__table__.c.id], words, SearchFilters(), None, 9, first=4
        )
        return page, list(conn.exec_driver_sql(settings).one())

    engine = db.create_engine(Settings(database_url=database_url))
    try:
        async with engine.connect() as conn:
            before = list((await conn.exec_driver_sql(settings)).one())
            page, after = await conn.run_sync(search)
    finally:
        await engine.dispose()
    assert page and after == before
    with log.open("rb") as f:
        f.seek(start)
        plans = f.read().decode(errors="replace")
    statements = plans.split(" LOG:  ")
    assert any("JOIN ticket_search_postings AS other1" in block for block in statements), plans[
        -3000:
    ]
    assert not [block for block in statements if "set_config" in block], plans[-3000:]


async def _count_plans(
    postgres: PostgresServer, database_url: str, arguments: dict[str, object], marker: str
) -> list[str]:
    """The logged plans of the statements holding ``marker`` that one count_tickets call
    with ``arguments`` ran."""
    assert postgres.data_dir is not None, (
        "reads the plans from the tests' own PostgreSQL server log"
    )
    explain_everything(postgres, database_url)
    _, name = server_at(database_url)
    postgres.psql("VACUUM ANALYZE tickets", name)  # the visibility map an index-only scan reads
    log = postgres.data_dir / "server.log"
    start = log.stat().st_size
    settings = Settings(database_url=database_url, toolsets=["read", "backlog"])
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("count_tickets", arguments)
    assert result.is_error is False and result.structured_content["groups"], result
    with log.open("rb") as f:
        f.seek(start)
        plans = f.read().decode(errors="replace")
    return [block for block in plans.split(" LOG:  ") if marker in block]


async def test_count_tickets_reads_tallies_and_only_the_tickets_the_clock_moves(
    postgres: PostgresServer, database_url: str
) -> None:
    """count_tickets grouped by queue and status reads the tallies the triggers keep
    (``ticket_counts``, ``ticket_count_deltas``) and, of the tickets, only those younger
    than 30 days and those whose breach is still ahead, each from an index alone
    (revision 0026): no pass over the open tickets."""
    plans = await _count_plans(
        postgres, database_url, {"group_by": ["queue", "status"]}, "ticket_count_deltas"
    )
    assert len(plans) == 1, plans
    assert "Index Only Scan using ix_tickets_created_at" in plans[0], plans[0]
    assert "Index Only Scan using ix_tickets_sla_breach_at" in plans[0], plans[0]
    assert "ix_tickets_counts" not in plans[0] and "Seq Scan on tickets" not in plans[0]


async def test_a_count_by_tag_reads_its_index_alone_in_heap_order(
    postgres: PostgresServer, database_url: str
) -> None:
    """A count the tallies do not hold (by tag) is one pass over ``ix_tickets_counts``,
    which PostgreSQL orders ``(status, queue, pk)`` (revision 0024): a group's entries
    follow the heap, so the scan's visibility checks stay on one map page at a time (the
    old order re-read one per ticket, bench/ANALYSIS.md)."""
    plans = await _count_plans(
        postgres, database_url, {"group_by": ["queue", "tag"]}, "count(*) FILTER"
    )
    assert len(plans) == 1, plans
    assert "Index Only Scan using ix_tickets_counts" in plans[0], plans[0]
    _, name = server_at(database_url)
    definition = postgres.psql(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_tickets_counts'", name
    )
    assert "(status, queue, pk) INCLUDE" in definition, definition
