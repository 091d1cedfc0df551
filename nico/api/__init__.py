"""HTTP API: app factory, error envelope, auth, pagination, routers and wire schemas."""
