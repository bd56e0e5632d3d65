"""A host page in headless Chromium (Debian's ``chromium``, driven by Playwright) that
embeds ticket-server's MCP Apps views as hosts do: ``host.html`` beside this file, with
the extension's reference host bridge (``.ci/apps/install.sh`` installs and bundles the
pinned @modelcontextprotocol/ext-apps). The view's tools/call requests reach the server
through a real MCP client; the browser test and ``make screenshots`` use it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fastmcp import Client
from fastmcp.apps import UI_EXTENSION_ID, UI_MIME_TYPE
from mcp.client.extension import advertise

ROOT = Path(__file__).resolve().parents[3]
HOST_PAGE = Path(__file__).with_name("host.html")
ORIGIN = "http://host.test"  # answered by the page's routes: nothing goes to a network


def apps_extension() -> Any:
    """The MCP Apps extension as a client that renders views declares it."""
    return advertise(UI_EXTENSION_ID, {"mimeTypes": [UI_MIME_TYPE]})


def install_bridge() -> Path:
    """The bundled reference host bridge (installed once into .cache/apps)."""
    subprocess.run(["bash", str(ROOT / ".ci/apps/install.sh")], check=True, timeout=600)
    return ROOT / ".cache/apps/app-bridge.js"


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError(
            "chromium not found: `sudo bash .ci/install-services.sh` (apt-get install chromium)"
        )
    return found


@asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(
            executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            await launched.close()


class Host:
    """One host page; ``show`` puts a view in it with a tool result, as a host does when
    the model called the view's tool."""

    def __init__(self, page: Any, client: Client) -> None:
        self.page, self.client = page, client

    @classmethod
    async def open(cls, browser: Any, client: Client, bridge: Path) -> Host:
        page = await browser.new_page(viewport={"width": 780, "height": 1000})

        async def serve(route: Any) -> None:
            path = urlparse(route.request.url).path
            files = {
                "/host.html": (HOST_PAGE, "text/html"),
                "/app-bridge.js": (bridge, "text/javascript"),
            }
            if path not in files:
                await route.fulfill(status=404)
                return
            file, content_type = files[path]
            await route.fulfill(body=file.read_text("utf-8"), content_type=content_type)

        async def call_tool(params: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool_mcp(params["name"], params.get("arguments") or {})
            return result.model_dump(by_alias=True, exclude_none=True, mode="json")

        await page.route(f"{ORIGIN}/**", serve)
        await page.expose_function("hostCallTool", call_tool)
        await page.goto(f"{ORIGIN}/host.html")
        return cls(page, client)

    async def show(
        self, view: str, tool: str, arguments: dict[str, Any], theme: str = "light"
    ) -> Any:
        """The frame of ``view`` (a ui:// URI) showing ``tool``'s result for ``arguments``."""
        result = await self.client.call_tool_mcp(tool, arguments)
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return await self.show_result(view, dumped, theme)

    async def show_result(self, view: str, result: dict[str, Any], theme: str = "light") -> Any:
        """The frame of ``view`` showing ``result`` (a CallToolResult as JSON)."""
        html = (await self.client.read_resource(view))[0].text  # type: ignore[union-attr]
        await self.page.evaluate("([h, r, t]) => startView(h, r, t)", [html, result, theme])
        return self.page.frame_locator("iframe")

    async def calls(self) -> list[dict[str, Any]]:
        """The tools/call requests the view sent through the host, oldest first."""
        calls: list[dict[str, Any]] = await self.page.evaluate("window.calls")
        return calls

    def frame(self) -> Any:
        """The view's frame (to evaluate in its window)."""
        return self.page.frames[1]
