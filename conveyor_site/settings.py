"""Django settings for a Conveyor node, driven by the environment.

With nothing set, a node runs embedded: a SQLite file under ``var/`` and the
in-memory channel layer. ``DATABASE_URL`` and ``REDIS_URL`` switch it to
PostgreSQL and Redis; ``CONVEYOR_<NAME>`` overrides an engine setting (see
``conveyor/conf.py`` and ``docs/operations.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.conf import from_env
from conveyor_site.dburl import parse_database_url, sqlite_config
from conveyor_site.layers import redis_channel_layer

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CONVEYOR_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, "1" if default else "0").strip().lower() in ("1", "true", "yes", "on")


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "conveyor-dev-insecure-change-me")
DEBUG = _env_bool("DJANGO_DEBUG")
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "conveyor",
    "conveyor.dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "conveyor_site.urls"
ASGI_APPLICATION = "conveyor.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": parse_database_url(os.environ["DATABASE_URL"], BASE_DIR)}
else:
    DATABASES = {"default": sqlite_config(VAR_DIR / "conveyor.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": redis_channel_layer(os.environ["REDIS_URL"], os.environ.get("CONVEYOR_CHANNEL_PREFIX", "conveyor"))
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGIN_URL = "/admin/login/"

# Conveyor's API views set their own authentication, permissions, renderers
# and error handler (a host project's REST_FRAMEWORK is the host's).
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}

# The schema's title and options are conveyor.urls'; these are this
# project's choices for the docs page (assets served locally, no CDN).
SPECTACULAR_SETTINGS = {
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

CONVEYOR = from_env(os.environ)

# Django's own task framework runs on Conveyor: `@task` functions enqueue
# into the caller's transaction; `manage.py conveyor_worker` runs them.
TASKS = {"default": {"BACKEND": "conveyor.django_tasks.ConveyorBackend"}}

LOG_LEVEL = os.environ.get("CONVEYOR_LOG_LEVEL", "INFO").upper()
# CONVEYOR_LOG_FORMAT=json: one JSON object a line, with node / task_id / queue.
LOG_FORMAT = "json" if os.environ.get("CONVEYOR_LOG_FORMAT", "text").strip().lower() == "json" else "text"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"},
        "json": {"()": "conveyor.logs.JsonFormatter"},
    },
    "filters": {"node": {"()": "conveyor.logs.NodeFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["node"]}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "conveyor": {"level": LOG_LEVEL},
        "django.request": {"level": "ERROR"},
    },
}
