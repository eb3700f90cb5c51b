# A Conveyor node: the standalone project (conveyor_site) on the pinned runtime set.
# Build:  docker build -t conveyor .
# Run (production): docker run -e DATABASE_URL=postgres://... -e REDIS_URL=redis://... \
#   -e CONVEYOR_API_TOKENS=... -e DJANGO_SECRET_KEY=<50+ random characters> -p 8080:8080 conveyor
# Migrate once per release: docker run ... conveyor python manage.py migrate

# Stage 1: wheels of requirements.txt (runtime only: no test or tooling
# package) and of Conveyor itself, built from the package's own files.
FROM python:3.13-slim AS wheels
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE requirements.txt ./
COPY conveyor ./conveyor
RUN pip wheel --no-cache-dir --wheel-dir /wheels -r requirements.txt \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# Stage 2: the runtime. Installs only from the wheels of stage 1; carries no
# tests, benchmarks, docs or build tools; runs as an unprivileged user.
FROM python:3.13-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=conveyor_site.settings CONVEYOR_VAR_DIR=/app/var
RUN groupadd --system conveyor \
 && useradd --system --gid conveyor --home-dir /app --no-create-home --shell /usr/sbin/nologin conveyor
WORKDIR /app
COPY --from=wheels /wheels /tmp/wheels
COPY requirements.txt ./
RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels -r requirements.txt "conveyor[server]" \
 && rm -rf /tmp/wheels
COPY manage.py ./
COPY conveyor_site ./conveyor_site
RUN python manage.py collectstatic --noinput -v0 \
 && mkdir -p /app/var \
 && chown conveyor:conveyor /app/var
USER conveyor
EXPOSE 8080
# Ready = the database and the channel layer answer (GET /readyz is 503 otherwise).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=4).status != 200)"]
CMD ["python", "manage.py", "conveyord", "--host", "0.0.0.0", "--port", "8080"]
