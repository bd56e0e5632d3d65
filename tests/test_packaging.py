"""The wheel ships every package of the tree: pyproject.toml lists the packages by hand
(the Alembic scripts at the top, migrations/, are installed as ticket_server.migrations),
so a new package that is not listed would be missing from an installed server."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_listed_packages_are_the_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "ticket_server").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    tree |= {"ticket_server.migrations", "ticket_server.migrations.versions"}
    assert set(config["packages"]) == tree
    assert config["package-dir"] == {"ticket_server.migrations": "migrations"}
