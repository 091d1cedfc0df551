"""Business rules per resource. Services take a session, flush but never commit (the caller owns the
transaction), and reject bad requests with :class:`nico.services.errors.ServiceError`."""
