"""``python -m nico.db.sql``: each rule and the digest of its live file, for the migration that applies it."""

from nico.db import sql

for name in sql.names():
    print(f"{name}\t{sql.digest(sql.load(name))}")
