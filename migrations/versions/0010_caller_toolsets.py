"""caller toolsets: the toolsets a caller's model is offered, in place of the deployment's

`callers.toolsets` holds toolset names (ticket_server/tools/toolsets.py), space-separated;
null, as for every existing caller, means the deployment's `TICKET_SERVER_TOOLSETS`.

Revision ID: 0010_caller_toolsets
Revises: 0009_search_term_deltas
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_caller_toolsets"
down_revision = "0009_search_term_deltas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("callers", sa.Column("toolsets", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("callers", "toolsets")
