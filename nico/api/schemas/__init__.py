"""Wire schemas (pydantic, camelCase on the wire), one module per resource; separate from ORM models."""
