"""NVLink logical partitions (spec §3): the tenant's "these GPUs share memory", from the wire to the SQL."""
