# syntax=docker/dockerfile:1
#
# kbserver container image: one process serving the HTTP API, MCP, git clone and the web admin.
#
# Build:   docker build -t kbserver .
# Run:     docker run -d --name kbserver --init -p 8765:8765 -v kbdata:/data \
#              -e KBSERVER_ADMIN_TOKEN=... kbserver
#          (without KBSERVER_ADMIN_TOKEN a token is generated once and stored in /data/admin-token;
#          `docker logs kbserver` shows it with the admin URL on first start.)
# Admin:   docker exec kbserver kbserver agent create NAME --data /data   (and kb/link/fsck ...)
# Health:  docker inspect --format '{{.State.Health.Status}}' kbserver
#
# The data folder /data holds the bare git repositories (the truth), control.db and disposable
# indexes; keep it on a named volume or a host folder writable by uid 10001. On an empty /data the
# server imports sample_kb/ as the KB `sample`.

FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# C git: the server answers `git clone` through git's smart HTTP backend, and fsck uses it.
# Repositories on a volume may be owned by another uid (bind mounts); trust them inside the
# container so git does not refuse them as "dubious ownership".
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*'

# Fixed uid/gid so host folders can be prepared for the data volume (chown 10001:10001 DIR).
RUN groupadd --system --gid 10001 kbserver \
    && useradd --system --uid 10001 --gid kbserver --home-dir /home/kbserver --create-home \
        --shell /usr/sbin/nologin kbserver

# The project (see .dockerignore). WORKDIR stays /app so sample_kb/ is next to the working
# directory when the server looks for it on first start.
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir . \
    && mkdir -p /data /cache \
    && chown kbserver:kbserver /data /cache

ENV KBSERVER_DATA=/data
VOLUME ["/data"]
EXPOSE 8765

USER kbserver

# /healthz answers 200 once the server is ready; slim has no curl, so ask with Python's urllib
# (urlopen raises on any non-2xx answer or connection error, which exits non-zero). If CMD is
# overridden with another --port, override the healthcheck too.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]

CMD ["kbserver", "serve", "--host", "0.0.0.0", "--port", "8765", "--data", "/data"]
