"""The instance: a tenant's machine and its NVLink bindings (spec §5, §6).

``router`` (HTTP: parse, authorize, call the service, render), ``schemas`` (the wire models, built
from views), ``service`` (list, get, update, delete, and the reads behind every response), ``views``
(plain frozen dataclasses), ``queries`` (every SQL statement, named for what it returns); and the use
cases: ``creation`` (create and batch create, top down), ``checks`` (what a create checks, in the
reference's order), ``claim`` (free machines for new instances, placement's choice locked),
``bindings`` (a create's and an update's NVLink bindings), ``document`` (the ``GET`` body PostgreSQL
writes).
"""
