"""The live class: classes, students, answers, and the events of the per-visitor limits."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "classroom_classes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("code", sa.String(8), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("revealed", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("creator", sa.String(80), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("code", name="uq_classroom_classes_code"),
    )
    op.create_index("ix_classroom_classes_expires_at", "classroom_classes", ["expires_at"])
    op.create_table(
        "classroom_students",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "class_id",
            sa.Integer(),
            sa.ForeignKey("classroom_classes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("nickname", sa.String(24), nullable=True),
        sa.Column("visitor", sa.String(80), nullable=False),
        sa.Column("joined_at", sa.Float(), nullable=False),
        sa.Column("window_start", sa.Float(), nullable=False),
        sa.Column("window_count", sa.Integer(), nullable=False),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.UniqueConstraint("token_hash", name="uq_classroom_students_token_hash"),
    )
    op.create_index("ix_classroom_students_class_id", "classroom_students", ["class_id"])
    op.create_table(
        "classroom_answers",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "class_id",
            sa.Integer(),
            sa.ForeignKey("classroom_classes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "student_id",
            sa.Integer(),
            sa.ForeignKey("classroom_students.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("question", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(64), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("first_correct", sa.Boolean(), nullable=False),
        sa.Column("slip", sa.String(400), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("answered_at", sa.Float(), nullable=False),
        sa.UniqueConstraint(
            "class_id", "question", "part", "student_id", name="uq_classroom_answer"
        ),
    )
    op.create_index("ix_classroom_answers_class_id", "classroom_answers", ["class_id"])
    op.create_index("ix_classroom_answers_student_id", "classroom_answers", ["student_id"])
    op.create_table(
        "classroom_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("visitor", sa.String(80), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_classroom_events_kind_visitor_at", "classroom_events", ["kind", "visitor", "at"]
    )


def downgrade() -> None:
    op.drop_table("classroom_events")
    op.drop_table("classroom_answers")
    op.drop_table("classroom_students")
    op.drop_table("classroom_classes")
