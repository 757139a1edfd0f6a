"""Alembic's environment for the live class's schema, run by webui.classroom.database.upgrade
on a connection it hands over (no alembic.ini). On PostgreSQL the upgrade holds an advisory lock:
replicas starting at once migrate one after the other, the second finding the schema at head."""

from alembic import context

from webui.classroom.models import Base

VERSION_TABLE = "classroom_alembic_version"
PG_LOCK = 726_594_113  # any fixed number: the advisory lock of this schema's migrations

connection = context.config.attributes["connection"]
if connection.dialect.name == "postgresql":
    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_LOCK})")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,
)
with context.begin_transaction():
    context.run_migrations()
