# nico: one image for every nico process of docker-compose.yml (API, reconciler, migrate, seed,
# simulators). `pip install .` puts the package in site-packages; the Alembic migrations stay in
# /opt/nico/migrations, which NICO_MIGRATIONS_DIR points `nico migrate` (and /readyz) at.
FROM python:3.11-slim

WORKDIR /opt/nico
COPY pyproject.toml README.md ./
COPY nico ./nico
COPY migrations ./migrations
RUN pip install --no-cache-dir . && useradd --system --home-dir /var/lib/nico --create-home nico

ENV NICO_MIGRATIONS_DIR=/opt/nico/migrations \
    NICO_DATA_DIR=/var/lib/nico \
    PYTHONUNBUFFERED=1
USER nico
EXPOSE 8080
CMD ["nico", "serve", "--host", "0.0.0.0", "--port", "8080"]
