"""Database: engine and sessions, embedded PostgreSQL, ORM models, migrations."""
