# nico: one image for every nico process of docker-compose.yml and deploy/kubernetes/ (API, reconciler,
# migrate, seed, simulators). The wheel carries the Alembic migrations (nico/_migrations, see
# setup.py), so `nico migrate` needs no path. The root filesystem may be read-only: nico writes only
# to NICO_DATA_DIR (the development token key and, with no NICO_DATABASE_URL, the embedded database).
FROM python:3.11-slim

WORKDIR /opt/nico
COPY pyproject.toml setup.py README.md ./
COPY nico ./nico
COPY migrations ./migrations
RUN pip install --no-cache-dir . && rm -rf /opt/nico/build \
    && useradd --system --uid 10001 --home-dir /var/lib/nico --create-home nico

WORKDIR /var/lib/nico
ENV NICO_DATA_DIR=/var/lib/nico \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001
EXPOSE 8080
CMD ["nico", "serve", "--host", "0.0.0.0", "--port", "8080"]
