"""`make screenshots`: docs/ticket-card.png and docs/queue-board.png, the two MCP Apps
views as the browser test's host page shows them (headless chromium), on a fresh sample
database in a temporary folder: SUP-4412's card for an agent who may write, and the
billing queue's board."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from fastmcp import Client

from tests.helpers import create_caller
from tests.tools.apps.browser import ROOT, Host, apps_extension, browser, install_bridge
from ticket_server import db
from ticket_server.admin.seeding import seed
from ticket_server.server import build_server
from ticket_server.settings import Settings
from ticket_server.tools.apps import BOARD_URI, CARD_URI

DOCS = ROOT / "docs"


async def shoot(url: str) -> None:
    settings = Settings(database_url=url, stdio_caller="agent")
    await seed(settings)
    await create_caller(url, "agent", ("tickets:read", "tickets:write"))
    bridge = install_bridge()
    async with (
        Client(build_server(settings), extensions=[apps_extension()]) as client,
        browser() as chromium,
    ):
        host = await Host.open(chromium, client, bridge)
        shots = [
            (CARD_URI, "get_ticket", {"ticket_id": "SUP-4412", "limit": 4}, "ticket-card.png"),
            (BOARD_URI, "get_queue_board", {"queue": "billing"}, "queue-board.png"),
        ]
        for uri, tool, arguments, name in shots:
            frame = await host.show(uri, tool, arguments)
            await frame.locator("article").wait_for(timeout=5_000)
            await frame.locator("main").screenshot(path=str(DOCS / name))
            print(f"wrote {DOCS / name}", file=sys.stderr)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'tickets.db'}"
        db.upgrade(url)
        asyncio.run(shoot(url))


if __name__ == "__main__":
    main()
