"""The topology page: static files (plain HTML, CSS and JavaScript, no build step) served by the API at
``/`` (see :mod:`nico.api.routers.web`)."""
