"""A small DRF project for the tests: SQLite in the test's temporary
directory (AUTHSVC_DJANGO_TEST_DIR), authsvc as the only authentication."""

import os

SECRET_KEY = "tests only, never deployed"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "rest_framework",
]
MIDDLEWARE = []
ROOT_URLCONF = "drfapp.urls"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(os.environ["AUTHSVC_DJANGO_TEST_DIR"], "db.sqlite3"),
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "authsvc_django.authentication.AuthsvcTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
    ],
}

# The tests point URL at the authsvc they start (override_settings).
AUTHSVC = {"URL": "http://127.0.0.1:9", "TIMEOUT": 2.0, "CACHE_SECONDS": 0}

# The class logs a warning for each 503; the tests check it with assertLogs
# and keep it off the test output otherwise.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"null": {"class": "logging.NullHandler"}},
    "loggers": {"authsvc_django": {"handlers": ["null"], "propagate": False}},
}
