"""The parsers of `ticket-server tags ...` and `ticket-server fields ...` (the commands
are ``admin.classification``); argparse only, so the CLI's start stays light."""

from __future__ import annotations

import argparse
from typing import Any

from ticket_server.settings import Settings

FIELD_TYPES = ("text", "number", "date", "enum", "boolean")


def _tags(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import classification

    if args.tags_command == "add":
        classification.tags_add(settings, args.name, args.description)
    elif args.tags_command == "list":
        classification.tags_list(settings, args.json)
    else:
        classification.tags_deactivate(settings, args.name)


def _fields(settings: Settings, args: argparse.Namespace) -> None:
    from ticket_server.admin import classification

    if args.fields_command == "add":
        classification.fields_add(
            settings, args.name, args.type, args.label, args.value, args.required, args.queue
        )
    elif args.fields_command == "list":
        classification.fields_list(settings, args.json)
    elif args.fields_command == "load":
        classification.fields_load(settings, args.file)
    else:
        classification.fields_deactivate(settings, args.name)


def add_parsers(commands: Any) -> None:
    """Add `tags` and `fields` to the CLI's subcommands (``commands``)."""
    tagsp = commands.add_parser("tags", help="the tag vocabulary (add, list, deactivate)")
    tags = tagsp.add_subparsers(dest="tags_command", required=True)
    add = tags.add_parser("add", help="add a tag to the vocabulary (name folded to lower case)")
    add.add_argument("name")
    add.add_argument("--description", default="", help="what the tag means (at most 300 chars)")
    tags.add_parser("list", help="list the tags and how many tickets have each").add_argument(
        "--json", action="store_true", help="one JSON object per tag"
    )
    tags.add_parser(
        "deactivate", help="stop a tag being added (tickets keep it; nothing is deleted)"
    ).add_argument("name")
    tagsp.set_defaults(handler=_tags)

    fieldsp = commands.add_parser(
        "fields", help="custom field definitions (add, list, deactivate, load)"
    )
    fields = fieldsp.add_subparsers(dest="fields_command", required=True)
    fadd = fields.add_parser("add", help="define a custom field")
    fadd.add_argument("name", help="a-z, 0-9 and _, starting with a letter")
    fadd.add_argument("--type", required=True, choices=FIELD_TYPES)
    fadd.add_argument("--label", help="shown to people (default: the name)")
    fadd.add_argument("--value", action="append", help="an enum's value (repeatable)")
    fadd.add_argument(
        "--required", action="store_true", help="a ticket must have it when opened; never cleared"
    )
    fadd.add_argument(
        "--queue", action="append", help="only tickets of this queue (repeatable; default all)"
    )
    fields.add_parser("list", help="list the field definitions").add_argument(
        "--json", action="store_true", help="one JSON object per field"
    )
    fields.add_parser(
        "deactivate", help="stop a field being set (tickets keep values; nothing is deleted)"
    ).add_argument("name")
    fields.add_parser(
        "load",
        help="define the fields of a TOML ([[field]] tables) or JSON file, all or none",
        description="Each field: name, type (text, number, date, enum, boolean), label, values "
        "(enum), required, queues. All are added in one transaction, or none.",
    ).add_argument("file")
    fieldsp.set_defaults(handler=_fields)
