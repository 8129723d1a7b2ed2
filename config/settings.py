"""Levers9 Arena settings: one module, driven by environment variables.

Variables (all optional for local use):
  DATABASE_URL          a PostgreSQL server of your own; unset, the embedded server is used
                        (started on first use: see levers9/embedded_pg.py)
  REDIS_URL             switches the task broker, the channel layer and the cache to Redis
  SECRET_KEY            unset, a key is generated once into var/secret_key
  DEBUG                 "1" to show tracebacks (default off)
  ALLOWED_HOSTS         comma separated (default: .localhost, localhost, 127.0.0.1)
  LEVERS9_DATASETS_DIR  the datasets volume (default var/datasets)
  LEVERS9_MODELS_DIR    the models volume (default var/models)
  LEVERS9_JUDGE_BASE    the base a world's fitted judge reads replies with: "default" (the
                        pool's default base), a Hugging Face repo id, or "none" for words alone
  LEVERS9_JUDGE_FEATURES_MAX_MB
                        what a workspace's cache of the base's reads may take on disk
                        (default 4096); each judge fit, and manage.py sweep_features, removes
                        the least used
  LEVERS9_Q_CLUSTER     the task-queue cluster this process serves (default "local-cpu")
  LEVERS9_HOST_NAME     this machine's name on job records (default: its hostname); each
                        worker machine needs its own
  LEVERS9_THROTTLE_WRITES_PER_USER / _PER_WORKSPACE
                        API write rates (default 600/minute and 2000/minute)
  LEVERS9_LOGIN_FAILURES_PER_ACCOUNT / _PER_ADDRESS / LEVERS9_LOGIN_FAILURE_WINDOW_S
                        failed sign-ins allowed before a 429 (default 10 and 50 in 900 s)
  LEVERS9_TOKEN_FAILURES_PER_ADDRESS
                        wrong API tokens from one address in that window before a 429 (20)
  LEVERS9_UPLOAD_MAX_MB the largest request body (default 50)
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("LEVERS9_VAR_DIR", BASE_DIR / "var"))


def _flag(name: str, default: str = "0") -> bool:
    return os.environ.get(name, default).strip().lower() in {"1", "true", "yes", "on"}


def _local_secret_key() -> str:
    """A per-checkout key for local use, so nobody ships a well-known default key."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = os.environ.get("SECRET_KEY") or _local_secret_key()
DEBUG = _flag("DEBUG")
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("ALLOWED_HOSTS", ".localhost,localhost,127.0.0.1").split(",")
    if host.strip()
]
# Each workspace is its own host and accepts only its own origin (see
# levers9.middleware.SameOriginCsrfMiddleware, which ignores wildcards): list here only exact
# origins a proxy in front rewrites, never one that covers other workspaces.
CSRF_TRUSTED_ORIGINS = [
    origin.strip()
    for origin in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",")
    if origin.strip()
]

DATASETS_DIR = Path(os.environ.get("LEVERS9_DATASETS_DIR", VAR_DIR / "datasets"))
MODELS_DIR = Path(os.environ.get("LEVERS9_MODELS_DIR", VAR_DIR / "models"))
JUDGE_BASE = os.environ.get("LEVERS9_JUDGE_BASE", "default").strip()
JUDGE_FEATURES_MAX_BYTES = int(
    float(os.environ.get("LEVERS9_JUDGE_FEATURES_MAX_MB", "4096")) * 1024 * 1024
)
REDIS_URL = os.environ.get("REDIS_URL", "")
# An attached four-card GPU node whose workers serve the "gpu-rtx-pro-6000" cluster.
LEVERS9_GPU_POOL_ATTACHED = _flag("LEVERS9_GPU_POOL")
# How many CPU jobs may run at once on the local pool.
LEVERS9_CPU_POOL_SLOTS = int(os.environ.get("LEVERS9_CPU_POOL_SLOTS", 1))

# --- apps: public schema (shared) and one schema per workspace (tenant) -------------------

SHARED_APPS = [
    "django_tenants",
    "daphne",
    "levers9",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "levers9.admin_site.Levers9AdminConfig",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "channels",
    "channels_postgres",
    "django_htmx",
]
# Each workspace keeps its own users, sessions, tokens and everything the arena makes.
TENANT_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "levers9.admin_site.Levers9AdminConfig",
    "django.contrib.messages",
    "rest_framework.authtoken",
    "levers9.jobs",
    "levers9.users",
    "arena",
    "policies",
    "training",
    "evaluation",
]
INSTALLED_APPS = SHARED_APPS + [app for app in TENANT_APPS if app not in SHARED_APPS]
# The packages whose functions a queued task may name (levers9.tasks refuses any other).
LEVERS9_TASK_PACKAGES = frozenset({"levers9", "arena", "policies", "training", "evaluation"})

TENANT_MODEL = "levers9.Workspace"
TENANT_DOMAIN_MODEL = "levers9.Domain"
PUBLIC_SCHEMA_NAME = "public"
PUBLIC_SCHEMA_URLCONF = "config.urls_public"
ROOT_URLCONF = "config.urls"
SHOW_PUBLIC_IF_NO_TENANT_FOUND = False
# Set the search path only when the schema changes, not before every query.
TENANT_LIMIT_SET_CALLS = True
# The host of the public site (platform operators' admin).
LEVERS9_PUBLIC_DOMAIN = os.environ.get("LEVERS9_PUBLIC_DOMAIN", "localhost")
LEVERS9_WORKSPACE_DOMAIN_SUFFIX = os.environ.get("LEVERS9_WORKSPACE_DOMAIN_SUFFIX", "localhost")

MIDDLEWARE = [
    # Outside the workspace lookup: it is the first query of every request (a database out
    # of reach is a 503 from there on), and an unknown host's 404 under /api/ is JSON too.
    "levers9.middleware.DatabaseUnavailableMiddleware",
    "levers9.middleware.ApiJsonErrorsMiddleware",
    "levers9.middleware.UploadLimitMiddleware",
    "django_tenants.middleware.main.TenantMainMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "levers9.middleware.SameOriginCsrfMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "levers9.middleware.RefuseBadTextMiddleware",
    "levers9.middleware.ApiSlashOptionalMiddleware",
    "levers9.jobs.limits.JobLimitPageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "levers9.context_processors.workspace",
                "policies.context_processors.world_badge",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# --- database --------------------------------------------------------------------------


def _database_url() -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from levers9 import embedded_pg

    if os.environ.get("LEVERS9_EMBEDDED_PG_MANUAL"):
        # `manage.py embeddedpg ...` manages the server itself: never start it from here.
        state = embedded_pg.read_state()
        return state.url if state else f"postgres://127.0.0.1:1/{embedded_pg.DATABASE_NAME}"
    # Every process (web, worker, tests) finds the running server, or starts it: a check of
    # a pid and a port when it runs, serialised by a lock when it must start.
    return embedded_pg.database_url()


_database = dj_database_url.parse(_database_url(), conn_max_age=0)
DATABASES = {
    "default": {**_database, "ENGINE": "django_tenants.postgresql_backend"},
    # channels_postgres talks to the same database through its own pool.
    "channels_postgres": {
        **_database,
        "ENGINE": "django.db.backends.postgresql",
        "TEST": {"MIRROR": "default"},
    },
}
DATABASE_ROUTERS = ("django_tenants.routers.TenantSyncRouter",)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth ------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# The throttle only refuses (PermissionDenied) an account or an address with too many recent
# failed sign-ins, on every way in (the sign-in page, the admin's); ModelBackend signs in.
AUTHENTICATION_BACKENDS = [
    "levers9.throttles.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed sign-ins allowed per account (in one workspace) and per client address within the
# window; the next attempt, right password or not, gets a 429 until the oldest failure ages out.
LEVERS9_LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("LEVERS9_LOGIN_FAILURES_PER_ACCOUNT", 10))
LEVERS9_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("LEVERS9_LOGIN_FAILURES_PER_ADDRESS", 50))
LEVERS9_LOGIN_FAILURE_WINDOW_S = int(os.environ.get("LEVERS9_LOGIN_FAILURE_WINDOW_S", 15 * 60))
# Wrong API tokens from one address in that window before every token from it gets a 429.
LEVERS9_TOKEN_FAILURES_PER_ADDRESS = int(os.environ.get("LEVERS9_TOKEN_FAILURES_PER_ADDRESS", 20))
# A machine's scoring process for a base (trainers.reading.base_server) exits after this idle time.
JUDGE_SCORING_IDLE_SECONDS = float(os.environ.get("LEVERS9_JUDGE_SCORING_IDLE_S", "900"))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"


def _plotly_js_folder() -> Path:
    """plotly.min.js ships inside the `plotly` package: serve it from there (no CDN here)."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    return Path(spec.origin).parent / "package_data" if spec and spec.origin else BASE_DIR


STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", _plotly_js_folder())]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# The largest body any request may send (levers9.middleware.UploadLimitMiddleware: a 413
# naming it). A real-call file is a few MB; the 1,017 shipped calls are under 4 MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("LEVERS9_UPLOAD_MAX_MB", 50)) * 1024 * 1024

# --- API -------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated call then gets 401 with WWW-Authenticate, not 403.
        "levers9.authentication.TokenAuthentication",  # wrong tokens throttled per address
        "levers9.authentication.SessionAuthentication",  # with the same-origin CSRF rule
    ],
    # Signed in AND a role in this workspace: a user without one reads nothing here, as the
    # pages refuse them. Views that need more name their own role (levers9.roles.HasRole).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "levers9.roles.HasRole",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "levers9.pagination.ListPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "levers9.api.exception_handler",
    # Writes only (levers9.throttles), per user and per workspace. Generous on purpose: ten
    # writes a second from one user is no person at a keyboard, and the test suite and the
    # demo stay far below; a runaway script meets them. "<n>/<second|minute|hour|day>".
    "DEFAULT_THROTTLE_CLASSES": [
        "levers9.throttles.UserWriteThrottle",
        "levers9.throttles.WorkspaceWriteThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "writes_per_user": os.environ.get("LEVERS9_THROTTLE_WRITES_PER_USER", "600/minute"),
        "writes_per_workspace": os.environ.get(
            "LEVERS9_THROTTLE_WRITES_PER_WORKSPACE", "2000/minute"
        ),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Levers9 Arena API",
    "DESCRIPTION": "Worlds, real calls, preferences, training jobs, evaluations and policy "
    "versions of one workspace. Reach a workspace at <slug>.localhost (or send a Host "
    "header); authenticate with a session or `Authorization: Token <token>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Turns sent in (judge items, live calls) share one name; a stored Turn keeps its own.
    "ENUM_NAME_OVERRIDES": {
        "SpeakerEnum": ["agent", "customer"],
        "WorkspaceRoleEnum": "levers9.roles.ROLES",
        "PickKindEnum": "arena.models.Pick.Kind",
    },
    # The interactive docs' assets are served from our own static files (no CDN here).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The default hook (enums), then the 429 every write may answer (levers9.throttles).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "levers9.throttles.schema_document_throttled_writes",
        "levers9.api.schema_document_errors",
    ],
}

# --- workers (django-q2) ---------------------------------------------------------------

# A failing task is not retried (max_attempts 1) and `retry` outlasts `timeout`, else a long
# training job would be handed to a second worker while the first still runs it.
_TASK_TIMEOUT = int(os.environ.get("LEVERS9_TASK_TIMEOUT", 6 * 3600))
Q_CLUSTER = {
    # One site name for every pool: it salts the signed task payloads, so all clusters
    # must share it. Each pool's workers listen on their own queue, `cluster_name`.
    "name": "levers9",
    "cluster_name": os.environ.get("LEVERS9_Q_CLUSTER", "local-cpu"),
    # The CPU pool's slots plus its short and background lanes (levers9.pools: one slot each):
    # a judge refit or a short job never keeps a person's granted job from a worker.
    "workers": int(os.environ.get("LEVERS9_Q_WORKERS", LEVERS9_CPU_POOL_SLOTS + 2)),
    "timeout": _TASK_TIMEOUT,
    "retry": _TASK_TIMEOUT + 600,
    "max_attempts": 1,
    "ack_failures": True,
    "catch_up": False,
    "save_limit": 5000,
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

# --- cache (sign-in lockouts and the API throttles' counts) ------------------------------

# Where every web process counts the same failures and writes, and a restart forgets nothing
# (an account locked for 15 minutes stayed locked only until the web process restarted): Redis
# when it is set, else the database's cache table (levers9_cache, made by the levers9 migration
# 0005_cache_table in the public schema, which every workspace's search path reaches).
CACHE_TABLE = "levers9_cache"


def cache_settings(redis_url: str) -> dict:
    if redis_url:
        return {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": redis_url,
                "KEY_PREFIX": "levers9",
            }
        }
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": CACHE_TABLE,
            # Past MAX_ENTRIES the cache drops a third of its entries, live ones too: room
            # enough that a flood of guessed names cannot push a lockout out.
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    }


CACHES = cache_settings(REDIS_URL)

# --- websockets (Channels) -------------------------------------------------------------

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            # channels_postgres, listening again after a database restart (levers9.channel_layer).
            "BACKEND": "levers9.channel_layer.ReconnectingPostgresChannelLayer",
            # channels_postgres silently gives no layer without TIME_ZONE, and opens four
            # connections per process unless the pool starts at one.
            "CONFIG": {
                **DATABASES["channels_postgres"],
                "TIME_ZONE": TIME_ZONE,
                "PSYCOPG_OPTIONS": {"min_size": 1, "max_size": 4},
            },
        }
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        # It warns on every event sent to a group nobody watches at the moment.
        "channels_postgres": {"level": "ERROR"},
    },
}
