"""links between tickets, and comments moved by a merge

``ticket_links`` holds typed relations (``duplicate_of``, ``related``, ``caused_by``),
each stored once from one ticket's side (the other reads the inverse).
``comments.merged_from`` names the ticket a merge moved a comment from (null: written
where it is).

Revision ID: 0016_links
Revises: 0015_attachments
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_links"
down_revision = "0015_attachments"
branch_labels = None
depends_on = None

LINK_TYPES = ("duplicate_of", "related", "caused_by")


def _enum(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=32)


def upgrade() -> None:
    op.create_table(
        "ticket_links",
        sa.Column("pk", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "ticket_id",
            sa.String(32),
            sa.ForeignKey("tickets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "other_id",
            sa.String(32),
            sa.ForeignKey("tickets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("type", _enum(LINK_TYPES, "link_type"), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_ticket_links_ticket_other_type",
        "ticket_links",
        ["ticket_id", "other_id", "type"],
        unique=True,
    )
    op.create_index("ix_ticket_links_other", "ticket_links", ["other_id"])
    op.add_column("comments", sa.Column("merged_from", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("comments") as batch:
        batch.drop_column("merged_from")
    op.drop_table("ticket_links")
