"""SQL of features that read across many tables, kept out of the ORM models."""
