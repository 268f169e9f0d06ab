"""Settings for Pairfix, read from the environment.

With nothing set, everything lives under `var/`: a SQLite database in WAL mode,
uploaded blobs in `var/media` and Celery's filesystem broker in `var/broker`, so
`runserver`, a worker and the tests run with no other service. Set
`DATABASE_URL` and `CELERY_BROKER_URL` for PostgreSQL and Redis.
"""

import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
import structlog
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from project.logredact import redact_secrets

# Django's generic classes (ModelAdmin, ModelForm, ...) take type arguments, as mypy reads them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    """Return the boolean environment variable `name`; raise on anything but True/False."""
    value = os.getenv(name, default)
    if value not in ("True", "False"):
        raise ImproperlyConfigured(f"{name} must be True or False, not {value!r}")
    return value == "True"


def envint(name: str, default: str, minimum: int | None = None) -> int:
    """Return the integer environment variable `name`.

    Raises ImproperlyConfigured, naming the variable and its value, on a
    non-integer or one below `minimum`.
    """
    value = os.getenv(name, default)
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be {minimum} or more, not {number}")
    return number


def envpath(name: str, default: Path) -> Path:
    """Return the directory named by `name` (default `default`), creating it if needed."""
    path = Path(os.getenv(name, str(default))).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


DEBUG = envbool("DEBUG", "True")
if not DEBUG and not os.getenv("SECRET_KEY"):
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is False")
SECRET_KEY = os.getenv("SECRET_KEY", "pairfix-development-key-not-for-production")
ALLOWED_HOSTS = [h for h in os.getenv("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.getenv("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# With DEBUG=False the site is HTTPS only: a redirect to https, secure cookies and
# HSTS, each of which the environment can turn off (e.g. SECURE_SSL_REDIRECT=False
# behind a proxy that redirects already). /healthz answers plain HTTP probes.
PRODUCTION = str(not DEBUG)
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", PRODUCTION)
# Pages send the CSRF token from the template (hx-headers), never read from the cookie.
CSRF_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "31536000" if not DEBUG else "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", PRODUCTION)
# Behind a proxy that terminates TLS: the header it sets to "https", e.g. X-Forwarded-Proto.
if proxy_header := os.getenv("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + proxy_header.upper().replace("-", "_"), "https")

VAR_DIR = envpath("VAR_DIR", BASE_DIR / "var")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "django_structlog",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "transcripts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "transcripts.outages.user_lookup_once",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django_structlog.middlewares.RequestMiddleware",
    "transcripts.middleware.no_store",
    # Last, as django-axes asks: it turns a lockout raised by its backend into a response.
    "axes.middleware.AxesMiddleware",
]

# Transcript content is untrusted: no inline script or style, nothing from another
# origin. htmx is served from 'self' and told (templates/base.html) not to inject
# its indicator styles or evaluate attribute code.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "object-src": [NONE],
    },
}

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

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
            ],
        },
    },
]

# WAL lets the worker write while the web server reads; IMMEDIATE takes the write
# lock up front, so concurrent writers wait instead of failing with "database is
# locked" halfway through a transaction.
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;",
}

if database_url := os.getenv("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(database_url, conn_max_age=60)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"]["OPTIONS"] = SQLITE_OPTIONS
    elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # A server that does not answer fails a request (a 503 page) and /healthz in about
        # two seconds: libpq's shortest timeout, which it takes for each address it tries.
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
            "connect_timeout", envint("DATABASE_CONNECT_TIMEOUT", "2")
        )
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "pairfix.sqlite3"),
            "OPTIONS": SQLITE_OPTIONS,
            # A file, not memory: the test worker thread and the live server need
            # their own connections to the same test database.
            "TEST": {"NAME": str(VAR_DIR / "test.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "transcripts:session_list"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes), on the dashboard's login and the admin's alike: after
# AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is
# refused (429, templates/registration/locked_out.html) for AXES_COOLOFF_MINUTES, even
# with the right password. Keyed on the pair, so nobody can lock a user out from
# elsewhere; `manage.py axes_reset_username NAME` lifts a lockout early.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", "5")
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Behind a proxy, REMOTE_ADDR is the proxy's: AXES_IPWARE_* or a callable would say more.
AXES_CLIENT_IP_CALLABLE = None

# Mail, for password reset: Django's own settings, from the environment. Without
# EMAIL_HOST no mail can be sent, so the reset pages are not served (404) and the
# login page does not offer them.
EMAIL_HOST = os.getenv("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", "587")
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "False")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", str(not EMAIL_USE_SSL))
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL cannot both be True")
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", "10")
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "pairfix@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
PASSWORD_RESET_ENABLED = bool(EMAIL_HOST)

# Days a workspace invitation link stays open (transcripts/invitations.py).
INVITATION_DAYS = envint("INVITATION_DAYS", "7")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = envpath("STATIC_ROOT", VAR_DIR / "static")
STATICFILES_DIRS = [BASE_DIR / "static"]

MEDIA_ROOT = envpath("MEDIA_ROOT", VAR_DIR / "media")
# Blobs (revisions, deltas, export zips): files under MEDIA_ROOT by default; in an S3
# bucket (any S3-compatible server) when STORAGE_URL, s3://KEY:SECRET@BUCKET/PREFIX?
# endpoint_url=...&region=..., or AWS_STORAGE_BUCKET_NAME (with django-storages' own
# AWS_S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_S3_REGION_NAME) is
# set. Hosts that share no disk must use a bucket. See transcripts/storage.py.
BLOB_STORAGE: dict[str, Any] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
if os.getenv("STORAGE_URL") or os.getenv("AWS_STORAGE_BUCKET_NAME"):
    from transcripts.storage import s3_storage

    storage_read_timeout = envint("STORAGE_READ_TIMEOUT", "30")

    BLOB_STORAGE = s3_storage(
        os.environ,
        # A part is held in memory while it is sent (S3 wants 5 MiB at least), four at once.
        multipart_bytes=envint("STORAGE_MULTIPART_BYTES", str(8 * 1024 * 1024)),
        connect_timeout=envint("STORAGE_CONNECT_TIMEOUT", "2"),
        read_timeout=storage_read_timeout,
        # Seconds a read of a GET's body may take in all (the read timeout bounds each wait
        # for the next bytes only); four read timeouts unless set.
        read_deadline=envint("STORAGE_READ_DEADLINE", str(4 * storage_read_timeout), minimum=1),
    )
STORAGES = {
    "default": BLOB_STORAGE,
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# A request body's form fields (and an append's JSON lines) are held in memory up to this.
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", str(50 * 1024 * 1024))
# Uploaded files are never held in memory: each is written to FILE_UPLOAD_TEMP_DIR as it
# arrives and hashed on the way (transcripts/uploads.py), then copied to storage.
FILE_UPLOAD_HANDLERS = ["transcripts.uploads.StagingUploadHandler"]
FILE_UPLOAD_TEMP_DIR = str(envpath("FILE_UPLOAD_TEMP_DIR", VAR_DIR / "tmp"))
# The limits of every way in (the form, the API, `manage.py ingest`), in bytes after
# decompression: each session, all sessions of one upload together, and how many
# sessions (files, or members of a .zip) one upload may hold; checked while the bytes
# arrive. Django's own file count stays one above, so the upload's message speaks first.
UPLOAD_MAX_FILE_SIZE = envint("UPLOAD_MAX_FILE_SIZE", str(1024**3))
UPLOAD_MAX_TOTAL_SIZE = envint("UPLOAD_MAX_TOTAL_SIZE", str(max(2 * 1024**3, UPLOAD_MAX_FILE_SIZE)))
UPLOAD_MAX_FILES = envint("UPLOAD_MAX_FILES", "100")
DATA_UPLOAD_MAX_NUMBER_FILES = UPLOAD_MAX_FILES + 1

# Redis hands a task whose worker died without acknowledging it (acks_late) to
# another worker after this many seconds; it must exceed the longest task.
BROKER_VISIBILITY_TIMEOUT = envint("BROKER_VISIBILITY_TIMEOUT", "3600")
if broker_url := os.getenv("CELERY_BROKER_URL"):
    CELERY_BROKER_URL = broker_url
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": BROKER_VISIBILITY_TIMEOUT,
        # Look for such tasks often enough to honour a short timeout.
        "unacked_restore_interval": min(10, max(1, BROKER_VISIBILITY_TIMEOUT // 5)),
        "unacked_restore_throttle": 1,
    }
else:
    broker_dir = envpath("BROKER_DIR", VAR_DIR / "broker")
    for sub in ("queue", "control", "processed"):
        (broker_dir / sub).mkdir(exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Producer and consumer share one folder: the web server writes where the
        # worker reads.
        "data_folder_in": str(broker_dir / "queue"),
        "data_folder_out": str(broker_dir / "queue"),
        "control_folder": str(broker_dir / "control"),
        "store_processed": True,
        "processed_folder": str(broker_dir / "processed"),
    }
CELERY_TASK_DEFAULT_QUEUE = os.getenv("CELERY_TASK_DEFAULT_QUEUE", "pairfix")
# Sync folders are local to one host. With CELERY_SYNC_QUEUE set, the tasks that read
# them (syncs) or write them (the job items of sessions whose source writes back) go to
# that queue, which only that host's worker consumes (`-Q pairfix,pairfix-sync`); unset,
# everything runs wherever a worker is (one host, or a folder every worker mounts).
CELERY_SYNC_QUEUE = os.getenv("CELERY_SYNC_QUEUE") or None
if CELERY_SYNC_QUEUE:
    CELERY_TASK_ROUTES = {
        name: {"queue": CELERY_SYNC_QUEUE}
        for name in ("transcripts.sync_source", "transcripts.sync_all_sources")
    }
# Progress lives in Job rows; nothing reads task results.
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Bulk jobs: items per task, at most, and the bytes of their revisions together past
# the first (runner.chunked), and how long a worker's claim on a chunk of items holds
# before another worker may take it over (its worker presumably died). Keep the
# lease above the time one chunk takes and below BROKER_VISIBILITY_TIMEOUT. On S3 a
# chunk waits a round trip for its first base and another for its last store: more
# sessions share them (bench/jobs.py --s3-latency; README, Benchmarks).
on_s3 = "S3BlobStorage" in BLOB_STORAGE["BACKEND"]
JOB_CHUNK_SIZE = envint("JOB_CHUNK_SIZE", "60" if on_s3 else "20", minimum=1)
JOB_CHUNK_BYTES = envint("JOB_CHUNK_BYTES", str(64 * 1024 * 1024), minimum=1)
JOB_CLAIM_LEASE = envint("JOB_CLAIM_LEASE", "120")
# On S3, a chunk reads this many sessions' bases ahead of the one analysed (it
# included) and stores as many repairs behind it, on as many threads of each worker
# (runner.blob_window). A real S3 answers in tens of milliseconds: enough ahead hides it.
JOB_BLOB_WINDOW = envint("JOB_BLOB_WINDOW", "8", minimum=1)
# A job reads a revision of at most this many bytes whole and analyses it in memory
# (about twice its size); a larger one is streamed from its blob.
JOB_INLINE_BYTES = envint("JOB_INLINE_BYTES", str(4 * 1024 * 1024))
if os.getenv("CELERY_BROKER_URL") and BROKER_VISIBILITY_TIMEOUT <= JOB_CLAIM_LEASE:
    # Redis would hand a slow chunk's task to a second worker while the first still holds
    # the claim: the second finds nothing to claim, and retries until the lease passes.
    raise ImproperlyConfigured(
        f"BROKER_VISIBILITY_TIMEOUT ({BROKER_VISIBILITY_TIMEOUT} s) must be above "
        f"JOB_CLAIM_LEASE ({JOB_CLAIM_LEASE} s)"
    )
# The beat sweep kicks a job again once it has been queued this many seconds (its
# kickoff was lost: the broker went away between the commit and the send).
JOB_SWEEP_AFTER = envint("JOB_SWEEP_AFTER", "60")

# Sync: folders may be followed only under these roots (os.pathsep-separated). By
# default only var/sync, so nothing else on the machine is readable until an
# operator says so (e.g. SYNC_ROOTS=var/sync:~/.claude/projects:~/.codex/sessions, keeping
# the default for the demo's sync source).
SYNC_ROOTS = [
    Path(p).expanduser().resolve()
    for p in os.getenv("SYNC_ROOTS", str(VAR_DIR / "sync")).split(os.pathsep)
    if p
]
# Seconds between syncs of every enabled source on the beat schedule.
SYNC_INTERVAL = envint("SYNC_INTERVAL", "60")
# Seconds a session stays live after its file or stream was last written: its
# unanswered tail calls are `pending_result` until then, `missing_result` after.
LIVE_GRACE = envint("LIVE_GRACE", "300")
CELERY_BEAT_SCHEDULE = {
    "sync-sources": {"task": "transcripts.sync_all_sources", "schedule": float(SYNC_INTERVAL)},
    "expire-live-sessions": {
        "task": "transcripts.expire_live_sessions",
        "schedule": float(max(5, min(60, LIVE_GRACE // 4))),
    },
    "sweep-jobs": {"task": "transcripts.sweep_jobs", "schedule": float(JOB_SWEEP_AFTER)},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Structured logs through structlog: one JSON object a line (LOG_FORMAT=json, the
# default with DEBUG=False) or key=value pairs (console). django-structlog binds a
# request id, the user id and the client address to every line of a request and
# logs `request_finished` with its status code; Celery tasks get their task id.
LOG_FORMAT = os.getenv("LOG_FORMAT", "console" if DEBUG else "json")
if LOG_FORMAT not in ("json", "console"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or console, not {LOG_FORMAT!r}")
LOG_LEVEL = os.getenv("LOG_LEVEL", "INFO")
DJANGO_STRUCTLOG_CELERY_ENABLED = True
DJANGO_STRUCTLOG_STATUS_START_LOG_LEVEL = logging.DEBUG  # request_finished says it all
_pre_chain: list[structlog.typing.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
# The push API (transcripts/api): token authentication, JSON only, one error shape.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["transcripts.api.auth.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["transcripts.api.permissions.TokenPermission"],
    "DEFAULT_RENDERER_CLASSES": ["transcripts.api.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["transcripts.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "transcripts.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # `format` is a filter of its own (a session format), not a renderer choice.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Pairfix API",
    "DESCRIPTION": (
        "Push sessions, append the records an agent runtime writes, list sessions and "
        "their faults, start repairs and jobs, fetch revisions. Authenticate with a "
        "workspace's API token: `Authorization: Bearer <token>`. Every error is "
        '`{"error": {"code": ..., "message": ...}}` with a stable code.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "PATH_CONVERTER_OVERRIDES": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999_999_999_999_999_999}
    },
    "ENUM_NAME_OVERRIDES": {
        "FaultKindEnum": "transcripts.models.FaultKinds",
        # An upload names a registry format; a filter also takes "unknown" (unreadable files).
        "FormatEnum": "transcripts.api.serializers.UPLOAD_FORMATS",
        "SessionFormatEnum": "transcripts.api.serializers.FILTER_FORMATS",
        "JobKindEnum": "transcripts.models.Job.Kind",
        "StartableJobKindEnum": "transcripts.api.serializers.STARTABLE_KINDS",
        "AnswerActionEnum": "transcripts.api.policies.ANSWER_ACTIONS",
        "DropActionEnum": "transcripts.api.policies.DROP_ACTIONS",
        "DuplicateActionEnum": "transcripts.api.policies.DUPLICATE_ACTIONS",
        "CallIdActionEnum": "transcripts.api.policies.CALL_ID_ACTIONS",
        "MoveActionEnum": "transcripts.api.policies.MOVE_ACTIONS",
        "ReportActionEnum": "transcripts.api.policies.REPORT_ACTIONS",
        "SplitActionEnum": "transcripts.api.policies.SPLIT_ACTIONS",
        "MalformedCallActionEnum": "transcripts.api.policies.MALFORMED_CALL_ACTIONS",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "transcripts.api.schema.add_error_responses",
        "transcripts.api.schema.close_requests",
    ],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": structlog.stdlib.ProcessorFormatter,
            "processor": structlog.processors.JSONRenderer(),
            "foreign_pre_chain": [*_pre_chain, redact_secrets],
        },
        "console": {
            "()": structlog.stdlib.ProcessorFormatter,
            "processor": structlog.dev.ConsoleRenderer(colors=False),
            "foreign_pre_chain": [*_pre_chain, redact_secrets],
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # Django's own server logs every request again; request_finished has them.
    "loggers": {
        "django.server": {"level": "WARNING"},
        # django-axes announces its version when each process starts (every manage.py
        # command included); its lockouts are logged at WARNING, and still are.
        "axes.apps": {"level": "WARNING"},
    },
}
structlog.configure(
    processors=[
        structlog.stdlib.filter_by_level,
        *_pre_chain,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        structlog.processors.UnicodeDecoder(),
        redact_secrets,  # invitation secrets and reset tokens in logged paths
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)

# The session page: a revision of at most this many bytes gets its timeline built
# during the request; a larger one by a Celery task while the page polls.
TIMELINE_INLINE_BYTES = envint("TIMELINE_INLINE_BYTES", str(4 * 1024 * 1024))
# An upload (not live) of more than this many bytes is stored without being read: a
# worker reads it and fills in its counts; its page shows the first records meanwhile.
# A smaller one is read during the upload.
INGEST_INLINE_BYTES = envint("INGEST_INLINE_BYTES", str(4 * 1024 * 1024))
