"""Model-provider adapters: the visible tools as a provider's ``tools`` field, and a
provider's tool call dispatched back to the right server and tool.

Names are namespaced per server (``<namespace>__<tool>``) in the form every provider
accepts (``[A-Za-z0-9_-]{1,64}``, starting with a letter), so two servers' ``search``
never collide. Shapes, each the value of the provider's request field:

- ``openai`` (Chat Completions ``tools``): ``[{"type": "function", "function": {"name",
  "description", "parameters"}}]``; a call is ``{"id", "type": "function", "function":
  {"name", "arguments": "<JSON text>"}}``, answered by ``{"role": "tool",
  "tool_call_id", "content"}``.
- ``anthropic`` (Messages ``tools``): ``[{"name", "description", "input_schema"}]``; a call
  is a ``tool_use`` block ``{"type": "tool_use", "id", "name", "input"}``, answered by a
  ``tool_result`` block ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``.
- ``gemini`` (``generateContent`` ``tools``): ``[{"functionDeclarations": [{"name",
  "description", "parametersJsonSchema"}]}]``; a call is a ``functionCall`` ``{"name",
  "args", "id"?}``, answered by ``{"functionResponse": {"name", "id"?, "response"}}``.

The size of a block is measured as compact UTF-8 JSON (the way SDKs send it) and its
tokens estimated as ceil(bytes / 4), the usual rule of thumb for the BPE tokenizers of
these providers: about +-25 % for JSON, framing of each provider not counted.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ticket_server.client.session import KitError
from ticket_server.client.tools import ToolDefinition

if TYPE_CHECKING:
    from ticket_server.client.kit import Kit

Provider = Literal["openai", "anthropic", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "gemini")
BYTES_PER_TOKEN = 4
ESTIMATE_METHOD = "bytes / 4, the usual rule of thumb for BPE tokenizers; about +-25 % for JSON"
MAX_NAME = 64
_ILLEGAL = re.compile(r"[^A-Za-z0-9_-]")


def provider_name(namespace: str, tool: str) -> str:
    """``namespace__tool`` in the characters every provider accepts; a name too long
    keeps its start and ends in a hash of the whole, so it stays unique."""
    name = f"{namespace}__{_ILLEGAL.sub('_', tool)}"
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(f"{namespace}/{tool}".encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def measure(block: Any) -> tuple[int, int]:
    """(bytes of ``block`` as compact UTF-8 JSON, estimated tokens)."""
    size = len(json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return size, math.ceil(size / BYTES_PER_TOKEN)


def tools_field(definitions: Sequence[tuple[str, ToolDefinition]], provider: str) -> Any:
    """The provider's ``tools`` field for ``(name, definition)`` pairs."""
    if provider == "openai":
        return [
            {
                "type": "function",
                "function": {"name": n, "description": d.description, "parameters": d.input_schema},
            }
            for n, d in definitions
        ]
    if provider == "anthropic":
        return [
            {"name": n, "description": d.description, "input_schema": d.input_schema}
            for n, d in definitions
        ]
    if provider == "gemini":
        return [
            {
                "functionDeclarations": [
                    {
                        "name": n,
                        "description": d.description,
                        "parametersJsonSchema": d.input_schema,
                    }
                    for n, d in definitions
                ]
            }
        ]
    raise ValueError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")


@dataclass(frozen=True)
class Cost:
    provider: str
    tools: int
    bytes: int
    tokens: int
    usd_per_request: float | None

    def line(self) -> str:
        cost = "" if self.usd_per_request is None else f", ~${self.usd_per_request:.6f} per request"
        return f"{self.provider}: {self.tools} tool(s), {self.bytes} bytes, ~{self.tokens} tokens{cost}"


class ToolBlock:
    """The tools a model is shown (the kit's visible set), by provider name."""

    def __init__(self, kit: Kit, definitions: Sequence[ToolDefinition]) -> None:
        self.kit = kit
        self.by_name: dict[str, ToolDefinition] = {}
        for definition in definitions:
            name = provider_name(kit.server(definition.server).prefix, definition.name)
            if name in self.by_name:  # two tool names that differ only in illegal characters
                raise KitError(
                    f"tools {definition.server}.{definition.name} and "
                    f"{self.by_name[name].server}.{self.by_name[name].name} share the provider name {name}"
                )
            self.by_name[name] = definition

    def tools(self, provider: str) -> Any:
        """The value of ``provider``'s ``tools`` request field."""
        return tools_field(list(self.by_name.items()), provider)

    def cost(self, provider: str, usd_per_million_tokens: float | None = None) -> Cost:
        """The block's size, estimated tokens, and (given a price) cost per request."""
        size, tokens = measure(self.tools(provider))
        usd = (
            None if usd_per_million_tokens is None else tokens * usd_per_million_tokens / 1_000_000
        )
        return Cost(provider, len(self.by_name), size, tokens, usd)

    async def dispatch(self, provider: str, call: Mapping[str, Any]) -> dict[str, Any]:
        """Run a provider's tool call through the kit and answer in the provider's shape.

        Everything the model can fix or should know (an unknown name, bad arguments, a
        refusal, a timeout, the tool's own ``isError``) comes back as an error result it
        can read, never as an exception."""
        call_id, name, arguments = _parse_call(provider, call)
        definition = self.by_name.get(name)
        try:
            if definition is None:
                raise KitError(
                    f"unknown tool {name!r}: call one of {', '.join(sorted(self.by_name))}"
                )
            result = await self.kit.call(definition.server, definition.name, arguments)
        except KitError as exc:
            return _answer(provider, call_id, name, str(exc), None, is_error=True)
        text = "".join(getattr(block, "text", "") for block in result.content)
        return _answer(
            provider, call_id, name, text, result.structured_content, is_error=bool(result.is_error)
        )


def _parse_call(provider: str, call: Mapping[str, Any]) -> tuple[str | None, str, Any]:
    if provider == "openai":
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = raw  # refused by the arguments model with a readable message
        return call.get("id"), function.get("name", ""), arguments
    if provider == "anthropic":
        return call.get("id"), call.get("name", ""), call.get("input") or {}
    if provider == "gemini":
        body = call.get("functionCall", call)
        return body.get("id"), body.get("name", ""), body.get("args") or {}
    raise ValueError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")


def _answer(
    provider: str, call_id: str | None, name: str, text: str, structured: Any, *, is_error: bool
) -> dict[str, Any]:
    content = (
        json.dumps(structured, ensure_ascii=False)
        if structured is not None and not is_error
        else text
    )
    if provider == "openai":
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": f"Error: {content}" if is_error else content,
        }
    if provider == "anthropic":
        return {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": content,
            "is_error": is_error,
        }
    response = (
        {"error": text}
        if is_error
        else (structured if isinstance(structured, dict) else {"result": text})
    )
    body: dict[str, Any] = {"name": name, "response": response}
    if call_id is not None:
        body["id"] = call_id
    return {"functionResponse": body}
