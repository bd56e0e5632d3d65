"""The published tool contract: a snapshot of tools/list, and a check that classifies
every difference from it as additive or breaking.

Rules (README, "Versioning and the published contract"): a new tool, a new optional input, a new output
field or a wider input type is additive; a removed or renamed tool or input, a new
required input, a narrowed input type, enum or bound, a removed output field or a
changed output type or shape is breaking. A breaking change ships under a new name.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from fastmcp import FastMCP

CONTRACT_FILE = Path("tool-contract.json")
Kind = Literal["additive", "breaking"]
Role = Literal["input", "output"]

# Bounds whose increase narrows what is accepted, and those whose decrease does.
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems")
# Annotation hints whose loss makes a tool less safe to call than it was.
_SAFE_HINTS = {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False}


@dataclass(frozen=True)
class Difference:
    kind: Kind
    tool: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.kind.upper():8} {self.tool}{': ' + self.where if self.where else ''}: {self.what}"


async def snapshot(server: FastMCP) -> dict[str, Any]:
    """Every tool the server registers, as tools/list sends it (name, description,
    schemas, annotations), whoever the caller: the contract is the whole published
    surface, so no identity or database is consulted. ``tools`` is what a model is
    shown (and all a client without the MCP Apps extension is listed); ``app_tools``
    the app-only tools (``_meta.ui.visibility: ["app"]``) of the views."""
    from ticket_server import compat

    async with compat.lifespan(server):  # the schemas as served (refs inlined at start)
        tools = [t.to_mcp_tool() for t in await server.list_tools(run_middleware=False)]
    entries: list[dict[str, Any]] = []
    app_entries: list[dict[str, Any]] = []
    for tool in sorted(tools, key=lambda t: t.name):
        dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        entry: dict[str, Any] = {
            k: dumped[k]
            for k in ("name", "description", "inputSchema", "outputSchema", "annotations")
            if k in dumped
        }
        ui: dict[str, Any] = (dumped.get("_meta") or {}).get("ui") or {}
        if "model" in ui.get("visibility", ["model"]):
            entries.append(entry)
        else:  # app-only (MCP Apps): listed to clients with the extension, never to a model
            app_entries.append({**entry, "_meta": {"ui": ui}})
    return {"tools": entries, "app_tools": app_entries} if app_entries else {"tools": entries}


def contract_server() -> FastMCP:
    """The server as published: default settings, with the clock before any retirement."""
    from ticket_server.server import build_server
    from ticket_server.settings import Settings

    return build_server(Settings(), clock=lambda: date.min)


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return schema.get("anyOf") or schema.get("oneOf") or [schema]


def _types(schema: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for variant in _variants(schema):
        kind = variant.get("type")
        if isinstance(kind, list):
            out.update(kind)
        elif kind:
            out.add(kind)
        else:
            out.add("any")
    return out


def _main(schema: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((v for v in _variants(schema) if v.get("type") == kind), None)


def _descriptions(schema: dict[str, Any]) -> list[Any]:
    variants = schema.get("anyOf") or schema.get("oneOf") or []
    return [schema.get("description"), *(v.get("description") for v in variants)]


def _enum(schema: dict[str, Any]) -> set[Any] | None:
    values = [v for variant in _variants(schema) for v in variant.get("enum", [])]
    return set(map(json.dumps, values)) if values else None


def compare_schema(
    old: dict[str, Any], new: dict[str, Any], tool: str, where: str, role: Role
) -> list[Difference]:
    """Differences between two JSON Schemas of one input or output value."""
    diffs: list[Difference] = []

    def add(kind: Kind, what: str) -> None:
        diffs.append(Difference(kind, tool, where, what))

    old_t, new_t = _types(old), _types(new)
    if "any" not in old_t and old_t != new_t:
        if role == "input":
            if "any" in new_t or new_t > old_t:
                add("additive", f"wider type {sorted(old_t)} -> {sorted(new_t)}")
            else:
                add("breaking", f"narrowed type {sorted(old_t)} -> {sorted(new_t)}")
        elif new_t < old_t:
            add("additive", f"narrower output type {sorted(old_t)} -> {sorted(new_t)}")
        else:
            add("breaking", f"output type changed {sorted(old_t)} -> {sorted(new_t)}")

    # A model reads an argument's or field's description (or a variant's) as it reads the
    # tool's.
    if where and _descriptions(old) != _descriptions(new):
        add("additive", "description changed")

    old_e, new_e = _enum(old), _enum(new)
    if old_e is not None and old_e != new_e:
        widened = new_e is None or new_e > old_e
        if (role == "input") == widened:
            add("additive", "enum widened" if widened else "enum narrowed")
        else:
            add("breaking", "enum narrowed" if not widened else "output enum gained values")

    if role == "input":
        for variant_old, variant_new in zip(_variants(old), _variants(new), strict=False):
            for key in _LOWER_BOUNDS + _UPPER_BOUNDS:
                a, b = variant_old.get(key), variant_new.get(key)
                if a == b:
                    continue
                lower = key in _LOWER_BOUNDS
                narrowed = b is not None and (a is None or (b > a if lower else b < a))
                add("breaking" if narrowed else "additive", f"{key} {a} -> {b}")

    old_obj, new_obj = _main(old, "object"), _main(new, "object")
    if old_obj and new_obj:
        diffs += _compare_properties(old_obj, new_obj, tool, where, role)
    old_arr, new_arr = _main(old, "array"), _main(new, "array")
    if old_arr and new_arr and "items" in old_arr and "items" in new_arr:
        diffs += compare_schema(old_arr["items"], new_arr["items"], tool, f"{where}[]", role)
    return diffs


def _compare_properties(
    old: dict[str, Any], new: dict[str, Any], tool: str, where: str, role: Role
) -> list[Difference]:
    diffs: list[Difference] = []
    old_p, new_p = old.get("properties", {}), new.get("properties", {})
    old_r, new_r = set(old.get("required", [])), set(new.get("required", []))
    prefix = f"{where}." if where else ""
    noun = "input" if role == "input" else "output field"
    for name, schema in old_p.items():
        path = f"{prefix}{name}"
        if name not in new_p:
            diffs.append(Difference("breaking", tool, path, f"{noun} removed or renamed"))
            continue
        diffs += compare_schema(schema, new_p[name], tool, path, role)
        if role == "input" and name in new_r and name not in old_r:
            diffs.append(Difference("breaking", tool, path, "input became required"))
        if role == "output" and name in old_r and name not in new_r:
            diffs.append(
                Difference("breaking", tool, path, "output field no longer always present")
            )
    for name in new_p.keys() - old_p.keys():
        path = f"{prefix}{name}"
        if role == "output":
            diffs.append(Difference("additive", tool, path, "new output field"))
        elif name in new_r:
            diffs.append(Difference("breaking", tool, path, "new required input"))
        else:
            diffs.append(Difference("additive", tool, path, "new optional input"))
    if (
        role == "input"
        and old.get("additionalProperties") is not False
        and new.get("additionalProperties") is False
    ):
        diffs.append(Difference("breaking", tool, where, "extra arguments no longer accepted"))
    return diffs


def compare(published: dict[str, Any], live: dict[str, Any]) -> list[Difference]:
    """Every difference between the published contract and the live tools."""
    old = {t["name"]: t for t in published["tools"]}
    new = {t["name"]: t for t in live["tools"]}
    diffs: list[Difference] = []
    for name, tool in old.items():
        if name not in new:
            diffs.append(Difference("breaking", name, "", "tool removed or renamed"))
            continue
        current = new[name]
        diffs += compare_schema(
            tool.get("inputSchema", {}), current.get("inputSchema", {}), name, "", "input"
        )
        old_out, new_out = tool.get("outputSchema"), current.get("outputSchema")
        if old_out is not None and new_out is None:
            diffs.append(Difference("breaking", name, "", "output schema removed"))
        elif old_out is not None and new_out is not None:
            if old_out.get("x-fastmcp-wrap-result") != new_out.get("x-fastmcp-wrap-result"):
                diffs.append(
                    Difference("breaking", name, "", "output shape changed (wrapped result)")
                )
            diffs += compare_schema(old_out, new_out, name, "", "output")
        elif old_out is None and new_out is not None:
            diffs.append(Difference("additive", name, "", "output schema added"))
        if tool.get("description") != current.get("description"):
            diffs.append(Difference("additive", name, "", "description changed"))
        # Any annotation change is breaking: clients decide from them whether to ask a
        # person before a call (a write tool's hints are what keeps a prompt away or not).
        old_a, new_a = tool.get("annotations") or {}, current.get("annotations") or {}
        for hint in sorted(old_a.keys() | new_a.keys()):
            before, after = old_a.get(hint), new_a.get(hint)
            if before == after:
                continue
            safe = _SAFE_HINTS.get(hint)
            what = (
                f"annotation {hint} no longer {safe}"
                if safe is not None and before == safe
                else f"annotation {hint} {before!r} -> {after!r}"
            )
            diffs.append(Difference("breaking", name, "", what))
    for name in new.keys() - old.keys():
        diffs.append(Difference("additive", name, "", "new tool"))
    if published.get("app_tools") or live.get("app_tools"):  # held to the same rules
        diffs += compare(
            {"tools": published.get("app_tools", [])}, {"tools": live.get("app_tools", [])}
        )
    return diffs


def write_contract(contract: dict[str, Any], path: Path = CONTRACT_FILE) -> None:
    """Write ``contract`` to ``path``, keeping the file's ``history``: dated notes, written
    by hand, on why the published tools changed (the snapshot cannot know why)."""
    if path.exists() and (history := read_contract(path).get("history")):
        contract = {**contract, "history": history}
    path.write_text(
        json.dumps(contract, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
    )


def read_contract(path: Path = CONTRACT_FILE) -> dict[str, Any]:
    contract: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return contract


# -- the model-facing block --------------------------------------------------------------

# What every request to a model pays for the tools: the published tools as a model
# request carries them (the OpenAI Chat Completions `tools` field, compact JSON, as
# `tools export` writes it), in tokens estimated as ceil(bytes / 4). The seeds' lesson
# (DESIGN.md): 31 tools at about 3,900 tokens cut tool-selection accuracy from 0.94 to
# 0.71, four of them with near-identical descriptions. `tools check` holds the default
# toolsets' block (what a caller without toolsets of its own is offered) to it; every
# toolset together is printed beside it: a deployment that opts every caller into every
# toolset pays that.
BLOCK_BUDGET_TOKENS = 4_000
# Two descriptions at least this similar (cosine of their word and word-pair counts,
# ``description_similarity``) read to a model as the same tool.
NEAR_IDENTICAL = 0.75


def model_block_tokens(contract: dict[str, Any]) -> int:
    """The estimated tokens of ``contract``'s tools as one model request carries them."""
    import mcp.types as mt

    from ticket_server.admin.export import envelope

    tools = [mt.Tool.model_validate(entry) for entry in contract["tools"]]
    block = json.dumps(envelope(tools, "openai"), ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(block.encode("utf-8")) / 4)


def _words(text: str) -> Counter[str]:
    words = re.findall(r"[a-z0-9_]+", text.lower())
    return Counter(words + [f"{a} {b}" for a, b in pairwise(words)])


def description_similarity(first: str, second: str) -> float:
    """The cosine similarity (0 to 1) of two descriptions' counts of words and of
    adjacent word pairs, case folded: 1 for the same text, high when one is the other
    with a few words changed, low for descriptions of different jobs. Lexical only: it
    catches a copied description with a few words changed (the seeds' case), not a
    paraphrase, and a long paragraph two descriptions share raises their score."""
    a, b = _words(first), _words(second)
    norm = math.sqrt(sum(n * n for n in a.values())) * math.sqrt(sum(n * n for n in b.values()))
    return sum(n * b[w] for w, n in a.items()) / norm if norm else 0.0


def near_identical(
    contract: dict[str, Any], threshold: float | None = None
) -> list[tuple[str, str, float]]:
    """Pairs of tools whose descriptions are at least ``threshold`` similar, most similar
    first, as (tool, tool, similarity). A deprecated tool and its replacement are not a
    pair: the deprecated one says which it is in its first line (tools/versions.py)."""
    from ticket_server.tools.versions import DEPRECATED

    threshold = NEAR_IDENTICAL if threshold is None else threshold
    versions = {frozenset((d.tool, d.replacement)) for d in DEPRECATED}
    tools = sorted(contract["tools"], key=lambda t: t["name"])
    pairs = []
    for i, first in enumerate(tools):
        for second in tools[i + 1 :]:
            if frozenset((first["name"], second["name"])) in versions:
                continue
            score = description_similarity(
                first.get("description", ""), second.get("description", "")
            )
            if score >= threshold:
                pairs.append((first["name"], second["name"], round(score, 2)))
    return sorted(pairs, key=lambda p: -p[2])


def toolset_blocks(contract: dict[str, Any]) -> list[tuple[str, str, list[str], int]]:
    """Each toolset of ``tools.toolsets`` with its description, its tools among those
    ``contract`` publishes and the estimated tokens of their model-facing block."""
    from ticket_server.tools.toolsets import TOOLSETS

    out: list[tuple[str, str, list[str], int]] = []
    for name, toolset in TOOLSETS.items():
        entries = [t for t in contract["tools"] if t["name"] in toolset.tools]
        tokens = model_block_tokens({"tools": entries})
        out.append((name, toolset.description, [t["name"] for t in entries], tokens))
    return out


def command(tools_command: str, path: Path, default_toolsets: Sequence[str]) -> None:
    """`ticket-server tools check | snapshot | toolsets` on the published contract at
    ``path``: prints the differences, the model-facing block and near-identical pairs
    (check), rewrites the file (snapshot) or lists the toolsets (``default_toolsets``:
    the deployment's); ``CommandError`` on a breaking change or a guard's failure."""
    import asyncio
    import sys

    from ticket_server.admin import CommandError
    from ticket_server.tools.toolsets import tools_in

    live = asyncio.run(snapshot(contract_server()))
    if tools_command == "toolsets":
        for name, description, names, tokens in toolset_blocks(live):
            chosen = "default" if name in default_toolsets else "not by default"
            print(f"{name} ({chosen}, ~{tokens} tokens): {description}")
            print(f"  {', '.join(names)}")
        return
    if tools_command == "snapshot":
        try:
            write_contract(live, path)
        except (OSError, ValueError) as exc:
            raise CommandError(
                f"tools snapshot: cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
            ) from exc
        print(f"wrote {len(live['tools'])} tools to {path}", file=sys.stderr)
        return
    if not path.exists():
        raise CommandError(f"no published contract at {path}; run `ticket-server tools snapshot`")
    try:
        published = read_contract(path)
    except OSError as exc:
        raise CommandError(f"tools check: cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:  # json.JSONDecodeError, or not UTF-8
        raise CommandError(
            f"tools check: {path} is not valid JSON ({exc}); "
            "`ticket-server tools snapshot` writes one"
        ) from exc
    if not isinstance(published, dict) or not isinstance(published.get("tools"), list):
        raise CommandError(
            f'tools check: {path} has no "tools" list, so it is no published contract; '
            "`ticket-server tools snapshot` writes one"
        )
    differences = compare(published, live)
    for difference in differences:
        print(difference)
    breaking = [d for d in differences if d.kind == "breaking"]
    print(
        f"tool contract: {len(differences)} difference(s), {len(breaking)} breaking",
        file=sys.stderr,
    )
    if breaking:
        raise CommandError(
            "breaking change(s) to published tools: ship them under a new _vN name instead"
        )
    tokens = model_block_tokens(live)
    offered = tools_in(default_toolsets)
    default = {"tools": [t for t in live["tools"] if t["name"] in offered]}
    default_tokens = model_block_tokens(default)
    print(
        f"model-facing block: the default toolsets ({', '.join(default_toolsets)}) "
        f"{len(default['tools'])} tools, ~{default_tokens} tokens (budget "
        f"{BLOCK_BUDGET_TOKENS}); every toolset together {len(live['tools'])} tools, "
        f"~{tokens} tokens",
        file=sys.stderr,
    )
    similar = near_identical(live)
    for first, second, score in similar:
        print(f"NEAR-IDENTICAL {first} / {second}: descriptions {score:.2f} similar")
    if default_tokens > BLOCK_BUDGET_TOKENS:
        raise CommandError(
            f"the default toolsets' model-facing block is ~{default_tokens} tokens, over its "
            f"budget of {BLOCK_BUDGET_TOKENS}: shorten descriptions and schemas, or move tools "
            "to a toolset a deployment opts into"
        )
    if similar:
        raise CommandError(
            f"{len(similar)} pair(s) of tools with near-identical descriptions (similarity "
            f">= {NEAR_IDENTICAL}): say in each what sets it apart, or merge them"
        )
