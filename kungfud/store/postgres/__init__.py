"""The PostgreSQL backend (docs/storage.md "PostgreSQL"): the same tables and
key shapes as LMDB, one SQL table per name, driven by the same writer, views,
check and migration code. Only this package (and the node mechanisms) import
psycopg."""

from .store import PgStore, is_pg_url, redact_url

__all__ = ["PgStore", "is_pg_url", "redact_url"]
