"""The job store: schema, migrations and repositories (SQLite or PostgreSQL)."""
