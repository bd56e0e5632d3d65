"""attachments: files on tickets, their bytes stored once per SHA-256

``attachment_blobs`` records each stored content by digest and the store holding it;
``attachment_chunks`` holds the bytes of those kept in the database, 1 MiB a row;
``attachments`` is one file on one ticket (name, detected media type, size, digest,
uploader, time, customer-uploaded flag), optionally with the comment it came with.

Revision ID: 0015_attachments
Revises: 0014_sla
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_attachments"
down_revision = "0014_sla"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attachment_blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("store", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "attachment_chunks",
        sa.Column(
            "sha256",
            sa.String(64),
            sa.ForeignKey("attachment_blobs.sha256", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "attachments",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "ticket_id",
            sa.String(32),
            sa.ForeignKey("tickets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("comment_pk", sa.Integer(), sa.ForeignKey("comments.pk", ondelete="SET NULL")),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("media_type", sa.String(127), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column(
            "sha256", sa.String(64), sa.ForeignKey("attachment_blobs.sha256"), nullable=False
        ),
        sa.Column("uploader", sa.String(200), nullable=False),
        sa.Column(
            "uploader_type",
            sa.Enum(
                "customer",
                "agent",
                "system",
                name="author_type",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("untrusted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_attachments_ticket_created_at", "attachments", ["ticket_id", "created_at", "id"]
    )
    op.create_index("ix_attachments_sha256", "attachments", ["sha256"])


def downgrade() -> None:
    op.drop_index("ix_attachments_sha256", table_name="attachments")
    op.drop_index("ix_attachments_ticket_created_at", table_name="attachments")
    op.drop_table("attachments")
    op.drop_table("attachment_chunks")
    op.drop_table("attachment_blobs")
