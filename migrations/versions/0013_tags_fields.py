"""tags and custom fields: the deployment's tag vocabulary and field definitions, and
each ticket's tags and typed field values (ticket_server/tickets/classification_models.py)

New tables only; no existing row changes. A field's value sits in the column of its
type (`value_text` for text and enum, `value_number`, `value_date`, `value_bool`),
exactly one set per row.

Revision ID: 0013_tags_fields
Revises: 0012_queues_customers
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_tags_fields"
down_revision = "0012_queues_customers"
branch_labels = None
depends_on = None

FIELD_TYPES = ("text", "number", "date", "enum", "boolean")


def upgrade() -> None:
    op.create_table(
        "tags",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.String(300), server_default="", nullable=False),
        sa.Column("active", sa.Boolean(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "ticket_tags",
        sa.Column(
            "ticket_pk",
            sa.Integer(),
            sa.ForeignKey("tickets.pk", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "tag_id", sa.Integer(), sa.ForeignKey("tags.id", ondelete="RESTRICT"), primary_key=True
        ),
    )
    op.create_index("ix_ticket_tags_tag_ticket", "ticket_tags", ["tag_id", "ticket_pk"])
    op.create_table(
        "custom_fields",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column(
            "type",
            sa.Enum(
                *FIELD_TYPES,
                name="custom_field_type",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("enum_values", sa.Text(), nullable=True),
        sa.Column("required", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("queues", sa.Text(), nullable=True),
        sa.Column("active", sa.Boolean(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "ticket_field_values",
        sa.Column(
            "ticket_pk",
            sa.Integer(),
            sa.ForeignKey("tickets.pk", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "field_id",
            sa.Integer(),
            sa.ForeignKey("custom_fields.id", ondelete="RESTRICT"),
            primary_key=True,
        ),
        sa.Column("value_text", sa.String(1000), nullable=True),
        sa.Column("value_number", sa.Float(), nullable=True),
        sa.Column("value_date", sa.Date(), nullable=True),
        sa.Column("value_bool", sa.Boolean(), nullable=True),
        sa.CheckConstraint(
            "(CASE WHEN value_text IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_number IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_date IS NULL THEN 0 ELSE 1 END"
            " + CASE WHEN value_bool IS NULL THEN 0 ELSE 1 END) = 1",
            name="ck_field_value_one",
        ),
    )
    for kind in ("text", "number", "date"):
        op.create_index(
            f"ix_ticket_field_values_{kind}", "ticket_field_values", ["field_id", f"value_{kind}"]
        )


def downgrade() -> None:
    op.drop_table("ticket_field_values")
    op.drop_table("custom_fields")
    op.drop_table("ticket_tags")
    op.drop_table("tags")
