# A Conveyor node. Build: docker build -t conveyor .
# Run (production): docker run -e DATABASE_URL=postgres://... -e REDIS_URL=redis://... \
#   -e CONVEYOR_API_TOKENS=... -e DJANGO_SECRET_KEY=... -p 8080:8080 conveyor
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=conveyor_site.settings
WORKDIR /app

COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN python manage.py collectstatic --noinput -v0 || true

EXPOSE 8080
# Migrate once per release (e.g. a one-off `docker run ... python manage.py migrate`), then:
CMD ["python", "manage.py", "conveyord", "--host", "0.0.0.0", "--port", "8080"]
