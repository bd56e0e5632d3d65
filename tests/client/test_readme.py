"""The README's client kit tutorial runs as written: its `kit.toml` and its Python code,
taken from the fenced blocks, against our server over stdio on the sample database."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def snippet(name: str, language: str) -> str:
    match = re.search(
        rf"<!-- client-kit: {re.escape(name)} -->\s*```{language}\n(.*?)```",
        README.read_text(),
        re.S,
    )
    assert match, f"no `client-kit: {name}` {language} block in README.md"
    return match.group(1)


def test_the_readme_tutorial_runs(template_db: Path, tmp_path: Path) -> None:
    """As written (issue 32): the database is the one `make run` migrates and seeds, the
    embedded default in the user's data directory (here under a HOME of the test's own),
    and no file or setting the README does not name is needed."""
    home = tmp_path / "home"
    data = home / ".local" / "share" / "ticket-server"  # platformdirs' user data dir, Linux
    data.mkdir(parents=True)
    shutil.copy(template_db, data / "tickets.db")
    (tmp_path / "kit.toml").write_text(snippet("kit.toml", "toml"), encoding="utf-8")
    (tmp_path / "tutorial.py").write_text(snippet("tutorial", "python"), encoding="utf-8")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TICKET_SERVER_", "XDG_DATA_HOME"))
    }
    env["HOME"] = str(home)
    env["PATH"] = (
        f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `ticket-server`
    )
    done = subprocess.run(
        [sys.executable, "tutorial.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    cost, status, first_hit = done.stdout.splitlines()
    assert re.fullmatch(
        r"openai: 1 tool\(s\), \d+ bytes, ~\d+ tokens, ~\$0\.\d{6} per request", cost
    )
    assert '"id": "SUP-4412"' in status
    assert re.fullmatch(r"SUP-\d+", first_hit)
    assert '"event":"handshake"' in done.stderr and '"event":"call"' in done.stderr
