"""A class safe for a real course (issue 39): who created a class from which network, whether
it still takes new students; which browser holds each student's place, a nickname key unique
within a class, and students the teacher removed."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "classroom_classes",
        sa.Column("network", sa.String(80), nullable=False, server_default=""),
    )
    op.add_column(
        "classroom_classes",
        sa.Column("joining", sa.Boolean(), nullable=False, server_default=sa.true()),
    )
    op.create_index("ix_classroom_classes_creator", "classroom_classes", ["creator"])
    op.create_index("ix_classroom_classes_network", "classroom_classes", ["network"])
    op.add_column("classroom_students", sa.Column("nickname_key", sa.String(72), nullable=True))
    op.add_column(
        "classroom_students",
        sa.Column("browser", sa.String(80), nullable=False, server_default=""),
    )
    op.add_column(
        "classroom_students",
        sa.Column("removed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index(
        "ix_classroom_students_class_browser", "classroom_students", ["class_id", "browser"]
    )
    op.create_index(
        "ix_classroom_students_class_visitor", "classroom_students", ["class_id", "visitor"]
    )
    op.create_index(
        "uq_classroom_students_nickname",
        "classroom_students",
        ["class_id", "nickname_key"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_classroom_students_nickname", "classroom_students")
    op.drop_index("ix_classroom_students_class_visitor", "classroom_students")
    op.drop_index("ix_classroom_students_class_browser", "classroom_students")
    with op.batch_alter_table("classroom_students") as batch:
        batch.drop_column("removed")
        batch.drop_column("browser")
        batch.drop_column("nickname_key")
    op.drop_index("ix_classroom_classes_network", "classroom_classes")
    op.drop_index("ix_classroom_classes_creator", "classroom_classes")
    with op.batch_alter_table("classroom_classes") as batch:
        batch.drop_column("joining")
        batch.drop_column("network")
