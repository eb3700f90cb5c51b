"""Django settings of the django-tasks-db side of the comparison (bench/peers/djtasks_bench.py)."""

import os
from urllib.parse import urlsplit

_admin = urlsplit(os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
SECRET_KEY = "bench-only"
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_DJTASKS_DB", "djtasks_compare"),
        "HOST": _admin.hostname,
        "PORT": _admin.port or 5432,
        "USER": _admin.username,
        "PASSWORD": _admin.password or "",
        "CONN_MAX_AGE": None,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
