"""Model-provider adapters: the visible tools as a provider's ``tools`` field, and a
provider's tool call dispatched back to the right server and tool.

Names are namespaced per server (``<namespace>__<tool>``) in the form every provider
accepts (``[A-Za-z0-9_-]{1,64}``, starting with a letter), so two servers' ``search``
never collide. Shapes, each the value of the provider's request field:

- ``openai`` (Chat Completions ``tools``): ``[{"type": "function", "function": {"name",
  "description", "parameters"}}]``; a call is ``{"id", "type": "function", "function":
  {"name", "arguments": "<JSON text>"}}``, answered by ``{"role": "tool",
  "tool_call_id", "content"}``.
- ``openai-responses`` (Responses ``tools``): ``[{"type": "function", "name",
  "description", "parameters", "strict"}]``; a call is a ``function_call`` item
  ``{"call_id", "name", "arguments": "<JSON text>"}``, answered by a
  ``function_call_output`` item ``{"call_id", "output"}``.
- ``anthropic`` (Messages ``tools``): ``[{"name", "description", "input_schema"}]``; a call
  is a ``tool_use`` block ``{"type": "tool_use", "id", "name", "input"}``, answered by a
  ``tool_result`` block ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``.
- ``gemini`` (``generateContent`` ``tools``): ``[{"functionDeclarations": [{"name",
  "description", "parametersJsonSchema"}]}]``; a call is a ``functionCall`` ``{"name",
  "args", "id"?}``, answered by ``{"functionResponse": {"name", "id"?, "response"}}``.

Both OpenAI shapes can be strict (``tools(provider, strict="auto")``) when every schema
qualifies: the conversion of the OpenAI Agents SDK, with optional properties nullable
(their nulls are removed again before the call). Images in a result become each
provider's image part (Chat Completions takes none in a tool message: a following user
message carries them); resource links and embedded resources become text naming them.

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

Provider = Literal["openai", "openai-responses", "anthropic", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("openai", "openai-responses", "anthropic", "gemini")
# The block sizes `client tools --price` prints: one per request shape (the Responses
# block is the Chat Completions block without its wrapper, so it is not priced apart).
PRICED: tuple[Provider, ...] = ("openai", "anthropic", "gemini")
BYTES_PER_TOKEN = 4
ESTIMATE_METHOD = "bytes / 4, the usual rule of thumb for BPE tokenizers; about +-25 % for JSON"
MAX_NAME = 64
_ILLEGAL = re.compile(r"[^A-Za-z0-9_-]")


def provider_name(namespace: str, tool: str, *, salt: int = 0) -> str:
    """``namespace__tool`` in the characters every provider accepts; a name too long
    keeps its start and ends in a hash of the whole, so it stays unique. ``salt`` > 0
    (the name is also another tool's, as ``a.b``'s and ``a_b``'s are) always ends in a
    hash, of the whole and of the salt after 1, should that name be taken too."""
    name = f"{namespace}__{_ILLEGAL.sub('_', tool)}"
    if len(name) > MAX_NAME or salt:
        whole = f"{namespace}/{tool}" + (f"#{salt}" if salt > 1 else "")
        digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def measure(block: Any) -> tuple[int, int]:
    """(bytes of ``block`` as compact UTF-8 JSON, estimated tokens)."""
    size = len(json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return size, math.ceil(size / BYTES_PER_TOKEN)


def tools_field(
    definitions: Sequence[tuple[str, ToolDefinition]], provider: str, *, strict: bool = False
) -> Any:
    """The provider's ``tools`` field for ``(name, definition)`` pairs; ``strict``: the
    OpenAI strict-mode schemas (``strict_schema``) with ``"strict": true``."""

    def parameters(d: ToolDefinition) -> dict[str, Any]:
        return strict_schema(d.input_schema) if strict else d.input_schema

    if provider == "openai":
        function: list[Any] = []
        for n, d in definitions:
            body: dict[str, Any] = {
                "name": n,
                "description": d.description,
                "parameters": parameters(d),
            }
            if strict:
                body["strict"] = True
            function.append({"type": "function", "function": body})
        return function
    if provider == "openai-responses":
        return [
            {
                "type": "function",
                "name": n,
                "description": d.description,
                "parameters": parameters(d),
                "strict": strict,
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


# Keywords OpenAI's strict mode does not accept in a function's parameters (its
# "supported schemas" list); a schema using one cannot be made strict.
_NOT_STRICT = frozenset(
    {
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "not",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "prefixItems",
    }
)


def strict_problem(schema: Any, path: str = "parameters") -> str | None:
    """Why ``schema`` cannot be expressed in OpenAI strict mode, or None when it can."""
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            found = strict_problem(item, f"{path}[{i}]")
            if found:
                return found
        return None
    if not isinstance(schema, dict):
        return None
    for key in _NOT_STRICT & set(schema):
        return f"{path}: `{key}` is not supported in strict mode"
    extra = schema.get("additionalProperties")
    if extra not in (None, False):
        return f"{path}: additionalProperties other than false is not supported in strict mode"
    is_object = schema.get("type") == "object" or "properties" in schema
    if is_object and not schema.get("properties") and extra is None and path != "parameters":
        return f"{path}: an open object (no properties) is not supported in strict mode"
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, sub in value.items():
                found = strict_problem(sub, f"{path}.{name}")
                if found:
                    return found
        elif key in ("items", "anyOf", "allOf", "oneOf"):
            found = strict_problem(value, f"{path}.{key}")
            if found:
                return found
    return None


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also admits null (how strict mode says "this one is optional")."""
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if any(isinstance(s, dict) and s.get("type") == "null" for s in schema.get("anyOf", [])):
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def strict_schema(schema: Any, *, top: bool = True) -> Any:
    """The conversion the OpenAI Agents SDK does (``ensure_strict_json_schema``), and the
    step it leaves to the application: every object closed (``additionalProperties:
    false``) with every property required, an optional property made nullable (the
    model sends null for "not given"; ``drop_strict_nulls`` removes it again), a
    ``default`` of null and ``$schema`` dropped, a single ``allOf`` merged."""
    if isinstance(schema, list):
        return [strict_schema(s, top=False) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k != "$schema" and (k != "$id" or not top)}
    if out.get("default", 0) is None:
        del out["default"]
    if isinstance(out.get("allOf"), list) and len(out["allOf"]) == 1:
        only = out.pop("allOf")[0]
        out = {**out, **(only if isinstance(only, dict) else {})}
    for key in ("$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {n: strict_schema(s, top=False) for n, s in out[key].items()}
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = strict_schema(out[key])
    if isinstance(out.get("items"), dict):
        out["items"] = strict_schema(out["items"], top=False)
    if out.get("type") == "object" or "properties" in out:
        properties = out.get("properties") or {}
        required = set(out.get("required") or [])
        converted = {}
        for name, sub in properties.items():
            sub = strict_schema(sub, top=False)
            converted[name] = (
                sub if name in required or not isinstance(sub, dict) else _nullable(sub)
            )
        out["properties"] = converted
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def drop_strict_nulls(schema: Any, arguments: Any) -> Any:
    """``arguments`` from a strict-mode model without the nulls that stand for "not
    given": a null for a property that is optional in ``schema`` (the server's own) and
    does not admit null there is removed, at every depth of nested objects."""
    if not isinstance(schema, dict) or not isinstance(arguments, dict):
        return arguments
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = {}
    for key, value in arguments.items():
        sub = properties.get(key)
        optional = key not in required and isinstance(sub, dict)
        if value is None and optional and isinstance(sub, dict) and not _admits_null(sub):
            continue
        out[key] = drop_strict_nulls(sub, value) if isinstance(sub, dict) else value
    return out


def _admits_null(schema: dict[str, Any]) -> bool:
    from ticket_server.client.tools import schema_validator

    try:
        return bool(schema_validator(schema).is_valid(None))
    except Exception:  # a fragment that is not a schema on its own ($ref): keep the null
        return True


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
    """The tools a model is shown (the kit's visible set), by provider name.

    ``missing``: the servers that could not be listed when the block was built, each
    with the reason (their tools are absent; the others are there). ``renamed``: the
    names that end in a hash because another tool's name, once sanitised, is the same
    (neither keeps it), each with why (also a ``renamed`` audit event). ``strict``: whether
    every tool's schema can be expressed in OpenAI strict mode (``strict_problems`` says
    why not); the OpenAI blocks are strict exactly then."""

    def __init__(
        self,
        kit: Kit,
        definitions: Sequence[ToolDefinition],
        missing: Mapping[str, str] | None = None,
    ) -> None:
        self.kit = kit
        self.missing: dict[str, str] = dict(missing or {})
        self.by_name: dict[str, ToolDefinition] = {}
        self.renamed: dict[str, str] = {}
        plain: dict[str, list[str]] = {}  # provider name -> the tools it would name
        for d in definitions:
            name = provider_name(kit.server(d.server).prefix, d.name)
            plain.setdefault(name, []).append(f"{d.server}.{d.name}")
        for definition in definitions:
            prefix, tool = kit.server(definition.server).prefix, definition.name
            first = provider_name(prefix, tool)
            # Tools whose names differ only in illegal characters (a.b, a_b): none keeps
            # the shared name, so a name never moves from one tool to another as the
            # visible set changes; each ends in a hash of its own.
            salt = 1 if len(plain[first]) > 1 else 0
            name = provider_name(prefix, tool, salt=salt)
            while name in self.by_name:
                salt += 1
                name = provider_name(prefix, tool, salt=salt)
            if salt:
                self.renamed[name] = f"{first} would name {' and '.join(plain[first])}"
                kit.audit.emit(
                    "renamed", server=definition.server, tool=tool, name=name, taken=first
                )
            self.by_name[name] = definition
        self.strict_problems = {
            name: found
            for name, d in self.by_name.items()
            if (found := strict_problem(d.input_schema)) is not None
        }
        self.strict_sent = False

    @property
    def strict_ok(self) -> bool:
        """Whether every tool's schema can be made strict (``strict_problems`` says why not)."""
        return bool(self.by_name) and not self.strict_problems

    def tools(self, provider: str, *, strict: bool | Literal["auto"] = False) -> Any:
        """The value of ``provider``'s ``tools`` request field.

        ``strict`` (OpenAI Chat Completions and Responses only): ``"auto"`` sends strict
        schemas when every tool qualifies, ``True`` insists (``KitError`` naming the tools
        that do not). A strict model sends null for an optional argument it leaves out;
        ``dispatch`` then removes those nulls before checking the arguments."""
        use = False
        if strict and provider in ("openai", "openai-responses"):
            if strict is True and not self.strict_ok:
                raise KitError(
                    "strict mode is not possible for: "
                    + "; ".join(f"{n} ({why})" for n, why in self.strict_problems.items())
                )
            use = self.strict_ok
        self.strict_sent = self.strict_sent or use
        return tools_field(list(self.by_name.items()), provider, strict=use)

    def cost(self, provider: str, usd_per_million_tokens: float | None = None) -> Cost:
        """The block's size, estimated tokens, and (given a price) cost per request."""
        size, tokens = measure(self.tools(provider))
        usd = (
            None if usd_per_million_tokens is None else tokens * usd_per_million_tokens / 1_000_000
        )
        return Cost(provider, len(self.by_name), size, tokens, usd)

    async def dispatch(self, provider: str, call: Mapping[str, Any]) -> dict[str, Any]:
        """Run a provider's tool call through the kit and answer in the provider's shape.

        Everything the model can fix or should know (arguments that are not a JSON
        object, an unknown name, bad arguments, a refusal, a timeout, the tool's own
        ``isError``) comes back as an error result it can read, never as an exception.
        Images and resources in the result are converted for the provider (OpenAI Chat
        Completions cannot take an image in a tool message: see ``dispatch_messages``)."""
        return (await self.dispatch_messages(provider, call))[0]

    async def dispatch_messages(
        self, provider: str, call: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """``dispatch``, and for OpenAI Chat Completions a following ``user`` message with
        the result's images (``image_url`` parts) when it has any: append them all."""
        call_id, name, arguments = _parse_call(provider, call)
        definition = self.by_name.get(name)
        try:
            if definition is None:
                known = ", ".join(sorted(self.by_name))
                missing = (
                    f"; not reachable now: {', '.join(sorted(self.missing))}"
                    if self.missing
                    else ""
                )
                raise KitError(f"unknown tool {name!r}: call one of {known}{missing}")
            if isinstance(arguments, _BadArguments):
                raise KitError(
                    f"invalid arguments for {definition.server}.{definition.name}: "
                    f"{arguments.why}; send the arguments as a JSON object"
                )
            if self.strict_sent and provider in ("openai", "openai-responses"):
                arguments = drop_strict_nulls(definition.input_schema, arguments)
            result = await self.kit.call(definition.server, definition.name, arguments)
        except KitError as exc:
            return [_answer(provider, call_id, name, [_text(str(exc))], None, is_error=True)]
        parts = [_part(block) for block in result.content]
        answer = _answer(
            provider,
            call_id,
            name,
            parts,
            result.structured_content,
            is_error=bool(result.is_error),
        )
        images = [p for p in parts if p["kind"] == "image"]
        if provider == "openai" and images:
            return [answer, _openai_images(call_id, images)]
        return [answer]


@dataclass(frozen=True)
class _BadArguments:
    why: str


def _arguments(raw: Any) -> Any:
    """A provider's arguments as a dict, or ``_BadArguments`` saying what they are."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return _BadArguments(f"the arguments are not valid JSON ({exc.msg} at {exc.pos})")
    if not isinstance(raw, dict):
        return _BadArguments(f"the arguments are not a JSON object (got {type(raw).__name__})")
    return raw


def _parse_call(provider: str, call: Mapping[str, Any]) -> tuple[str | None, str, Any]:
    if provider == "openai":
        function = call.get("function") or {}
        return call.get("id"), function.get("name", ""), _arguments(function.get("arguments"))
    if provider == "openai-responses":  # a `function_call` output item
        return call.get("call_id"), call.get("name", ""), _arguments(call.get("arguments"))
    if provider == "anthropic":
        return call.get("id"), call.get("name", ""), _arguments(call.get("input"))
    if provider == "gemini":
        body = call.get("functionCall", call)
        return body.get("id"), body.get("name", ""), _arguments(body.get("args"))
    raise ValueError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")


def _text(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


def _part(block: Any) -> dict[str, Any]:
    """One MCP content block as a provider-neutral part: text, image (base64 data and
    MIME type), or a resource (link or embedded) described in text for the model."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return _text(block.text)
    if kind == "image":
        return {"kind": "image", "data": block.data, "mime_type": block.mime_type}
    if kind == "resource_link":
        about = f"{block.name} <{block.uri}>"
        if block.mime_type:
            about += f" ({block.mime_type})"
        if block.description:
            about += f": {block.description}"
        return _text(f"[resource link] {about}")
    if kind == "resource":
        resource = block.resource
        mime = f" ({resource.mime_type})" if resource.mime_type else ""
        if getattr(resource, "text", None) is not None:
            return _text(f"[resource {resource.uri}{mime}]\n{resource.text}")
        if (resource.mime_type or "").startswith("image/"):
            return {"kind": "image", "data": resource.blob, "mime_type": resource.mime_type}
        size = len(getattr(resource, "blob", "") or "") * 3 // 4
        return _text(f"[resource {resource.uri}{mime}: binary, about {size} bytes, not shown]")
    if kind == "audio":
        return _text(f"[audio ({block.mime_type}): not shown]")
    return _text(f"[{kind} content: not shown]")


def _plain(parts: Sequence[dict[str, Any]]) -> str:
    """The parts as one text, an image named where it stood."""
    return "\n".join(
        p["text"] if p["kind"] == "text" else f"[image ({p['mime_type']})]" for p in parts
    )


def _openai_images(call_id: str | None, images: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f"The image(s) returned by tool call {call_id}:"},
            *(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{p['mime_type']};base64,{p['data']}"},
                }
                for p in images
            ),
        ],
    }


def _answer(
    provider: str,
    call_id: str | None,
    name: str,
    parts: Sequence[dict[str, Any]],
    structured: Any,
    *,
    is_error: bool,
) -> dict[str, Any]:
    text = _plain(parts)
    has_images = any(p["kind"] == "image" for p in parts)
    # Structured content replaces the text (it is the same JSON) unless the result
    # carries more than text: then the model gets every part.
    use_structured = structured is not None and not is_error and not has_images
    content = json.dumps(structured, ensure_ascii=False) if use_structured else text
    if provider == "openai":
        if has_images:
            content += "\n(the image(s) follow in the next message)"
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": f"Error: {content}" if is_error else content,
        }
    if provider == "openai-responses":
        if not has_images:
            output: Any = f"Error: {content}" if is_error else content
        else:
            output = [
                {"type": "input_text", "text": p["text"]}
                if p["kind"] == "text"
                else {
                    "type": "input_image",
                    "image_url": f"data:{p['mime_type']};base64,{p['data']}",
                }
                for p in parts
            ]
        return {"type": "function_call_output", "call_id": call_id, "output": output}
    if provider == "anthropic":
        blocks: Any = content
        if has_images:
            blocks = [
                {"type": "text", "text": p["text"]}
                if p["kind"] == "text"
                else {
                    "type": "image",
                    "source": {"type": "base64", "media_type": p["mime_type"], "data": p["data"]},
                }
                for p in parts
            ]
        return {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": blocks,
            "is_error": is_error,
        }
    response = (
        {"error": text}
        if is_error
        else (structured if isinstance(structured, dict) and use_structured else {"result": text})
    )
    body: dict[str, Any] = {"name": name, "response": response}
    if call_id is not None:
        body["id"] = call_id
    if has_images:  # Gemini's multimodal function response
        body["parts"] = [
            {"inlineData": {"mimeType": p["mime_type"], "data": p["data"]}}
            for p in parts
            if p["kind"] == "image"
        ]
    return {"functionResponse": body}
