"""The smallest Django project the Django middleware's tests serve
(tests/serve_django.py): no database of Django's own, the idempotency
middleware on IDEM_TEST_DSN, the views of django_views.py. IDEM_APP_OPTIONS
as for apps.py: "wait=10,bind_lock_to_session=false"."""
import os

SECRET_KEY = "tests only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "django_views"
INSTALLED_APPS = []
DATABASES = {}
USE_TZ = True
MIDDLEWARE = ["idem_client.django.IdempotencyMiddleware"]
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"stderr": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["stderr"], "level": "WARNING"}}

IDEM = {"DSN": os.environ["IDEM_TEST_DSN"], "REPLAY_HEADERS": ["x-order-id"]}
for _item in filter(None, os.environ.get("IDEM_APP_OPTIONS", "").split(",")):
    _name, _value = _item.split("=", 1)
    if _name in ("wait", "lock_timeout"):
        IDEM[_name.upper()] = float(_value)
    elif _name == "bind_lock_to_session":
        IDEM["BIND_LOCK_TO_SESSION"] = _value == "true"
    else:
        IDEM[_name.upper()] = _value
