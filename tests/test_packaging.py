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


def test_make_install_says_what_it_does_and_shows_pip_progress(tmp_path: Path) -> None:
    """`make run` on a fresh machine first installs for minutes: the recipe says so before
    pip starts and leaves pip's per-package progress on (no --quiet). Run for real with a
    stand-in interpreter in a venv of the test's own (VENV=...), which records its
    arguments and prints what pip would."""
    import subprocess

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\necho "Collecting fastmcp"\n', encoding="utf-8"
    )
    fake.chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), f"VENV={venv}", "install"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "installing ticket-server" in done.stderr and "few minutes" in done.stderr
    assert "Collecting fastmcp" in done.stdout  # pip's own lines reach the terminal
    args = (tmp_path / "args").read_text().split()
    assert args[:3] == ["-m", "pip", "install"] and "--quiet" not in args and "-q" not in args
    assert (venv / ".installed-stamp").exists()
