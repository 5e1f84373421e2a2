"""DRF authentication against authsvc: ``Authorization: Token <key>``, a
session or a personal access token with the ``info`` scope, is checked
with authsvc's ``GET /api/auth/info``, and the view gets a Django user
created or updated from the reply.

    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "authsvc_django.authentication.AuthsvcTokenAuthentication",
        ],
    }
    AUTHSVC = {"URL": "http://127.0.0.1:8080", "TIMEOUT": 2.0, "CACHE_SECONDS": 0}
"""

import logging
import threading

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from .client import (
    EnrolmentRequired,
    InfoClient,
    InsufficientScope,
    InvalidToken,
    TokenCache,
    Unavailable,
    token_kind,
)

__all__ = [
    "AuthsvcEnrolmentRequired",
    "AuthsvcInsufficientScope",
    "AuthsvcToken",
    "AuthsvcTokenAuthentication",
    "AuthsvcUnavailable",
    "sync_user",
]

logger = logging.getLogger("authsvc_django")

DEFAULTS = {
    "URL": None,  # required: authsvc's base URL, e.g. http://127.0.0.1:8080
    "TIMEOUT": 2.0,  # seconds, for connecting and for each read
    "CACHE_SECONDS": 0,  # 0: every request asks authsvc
    "CACHE_MAX_ENTRIES": 10000,
    "CA_FILE": None,  # for an https URL: CA bundle instead of the system's
}


class AuthsvcUnavailable(exceptions.APIException):
    """authsvc could not be asked, or did not decide: 503, with
    ``Retry-After: 1``. Never an anonymous user, never a 401 or 403."""

    status_code = 503
    default_detail = _("The authentication service is unavailable; try again later.")
    default_code = "unavailable"
    wait = 1  # DRF's exception handler sends it as Retry-After


class AuthsvcInsufficientScope(exceptions.PermissionDenied):
    """A live personal access token without the ``info`` scope: 403
    ``insufficient_scope``, as authsvc answers it. The token is good, so
    asking again with it cannot help (not a 401 challenge)."""

    default_detail = _("This token's scopes do not cover this service.")
    default_code = "insufficient_scope"


class AuthsvcEnrolmentRequired(exceptions.PermissionDenied):
    """A live session of a user authsvc's --require-mfa covers who has no
    second factor yet: 403 ``mfa_enrollment_required``, as authsvc answers
    it. The session may only enrol a second factor at authsvc, so it is
    never authenticated as its user here; asking again with it cannot help
    until the user has enrolled (not a 401 challenge, not a 503)."""

    default_detail = _("A second factor is required: enrol one at the authentication service first.")
    default_code = "mfa_enrollment_required"


class AuthsvcToken:
    """``request.auth`` of a request authsvc authenticated: the token's
    ``key``, its ``kind`` ("session" or "pat", a personal access token) and
    authsvc's ``info`` reply (username, name, email, groups, admin)."""

    __slots__ = ("key", "kind", "info")

    def __init__(self, key, info, kind="session"):
        self.key = key
        self.kind = kind
        self.info = info

    def __repr__(self):
        return "<AuthsvcToken of %r>" % self.info.get("username")


_lock = threading.Lock()
_clients = {}  # (url, timeout, ca_file) -> InfoClient
_caches = {}  # (ttl, max_entries) -> TokenCache


def _config():
    conf = getattr(settings, "AUTHSVC", None)
    if not isinstance(conf, dict):
        raise ImproperlyConfigured('settings.AUTHSVC must be a dict such as {"URL": "http://127.0.0.1:8080"}')
    unknown = sorted(set(conf) - set(DEFAULTS))
    if unknown:
        raise ImproperlyConfigured("settings.AUTHSVC: unknown key(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    merged = dict(DEFAULTS, **conf)
    timeout = merged["TIMEOUT"]
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ImproperlyConfigured("settings.AUTHSVC TIMEOUT must be a number of seconds above 0")
    ttl = merged["CACHE_SECONDS"]
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
        raise ImproperlyConfigured("settings.AUTHSVC CACHE_SECONDS must be a number of seconds, 0 or more")
    size = merged["CACHE_MAX_ENTRIES"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ImproperlyConfigured("settings.AUTHSVC CACHE_MAX_ENTRIES must be a whole number above 0")
    return merged


def _client_and_cache():
    conf = _config()
    ckey = (conf["URL"], float(conf["TIMEOUT"]), conf["CA_FILE"])
    with _lock:
        client = _clients.get(ckey)
        if client is None:
            try:
                client = InfoClient(conf["URL"], float(conf["TIMEOUT"]), conf["CA_FILE"])
            except ValueError as exc:
                raise ImproperlyConfigured("settings.AUTHSVC: %s" % exc)
            _clients[ckey] = client
        cache = None
        if conf["CACHE_SECONDS"] > 0:
            kkey = (conf["CACHE_SECONDS"], conf["CACHE_MAX_ENTRIES"])
            cache = _caches.get(kkey)
            if cache is None:
                cache = _caches[kkey] = TokenCache(conf["CACHE_SECONDS"], conf["CACHE_MAX_ENTRIES"])
    return client, cache


def fetch_info(key):
    """authsvc's /info reply for key, from the cache when it is on; raises
    InvalidToken, InsufficientScope, EnrolmentRequired or Unavailable. Only
    live answers are cached, for CACHE_SECONDS whatever the kind of token: a
    revoked personal access token lives here no longer than a revoked
    session, and a refusal is asked about again on the next request."""
    client, cache = _client_and_cache()
    if cache is not None:
        info = cache.get(key)
        if info is not None:
            return info
    info = client.info(key)
    if cache is not None:
        cache.put(key, info)
    return info


def _fit(model, field, value):
    """value cut to field's max_length, so a long name never fails the save."""
    length = model._meta.get_field(field).max_length
    return value[:length] if length else value


def sync_user(info):
    """The Django user named info["username"], created (with an unusable
    password) or updated so that is_staff is info["admin"], first_name and
    last_name are info["name"] split at its first space, email is
    info["email"], and its groups are exactly info["groups"] (Group objects
    created as needed). Writes only what changed."""
    from django.contrib.auth.models import Group  # needs the app registry

    User = get_user_model()
    manager = User._default_manager
    lookup = {User.USERNAME_FIELD: info["username"]}

    first, _sep, last = info["name"].partition(" ")
    wanted = {"is_staff": info["admin"], "first_name": first, "last_name": last, "email": info["email"]}
    fields = {f.name for f in User._meta.get_fields()}
    wanted = {k: (_fit(User, k, v) if isinstance(v, str) else v) for k, v in wanted.items() if k in fields}

    try:
        user = manager.get(**lookup)
    except User.DoesNotExist:
        user = User(**lookup, **wanted)
        user.set_unusable_password()
        try:
            with transaction.atomic():
                user.save()
        except IntegrityError:  # another request created it first
            user = manager.get(**lookup)
    changed = [k for k, v in wanted.items() if getattr(user, k) != v]
    if changed:
        for k in changed:
            setattr(user, k, wanted[k])
        user.save(update_fields=changed)

    if "groups" in fields:
        names = sorted(set(info["groups"]))
        if sorted(user.groups.values_list("name", flat=True)) != names:
            groups = [Group.objects.get_or_create(name=name)[0] for name in names]
            user.groups.set(groups)
    return user


class AuthsvcTokenAuthentication(TokenAuthentication):
    """DRF's TokenAuthentication, with authsvc instead of the authtoken
    table: the same header parsing and the same 401 challenge
    (``WWW-Authenticate: Token``).

    The key is a session (40 lowercase hex characters) or a personal
    access token (``authsvc_pat_…``, its checksum checked here first).

    - authsvc says the token is live: ``(user, AuthsvcToken)``, the user
      synced from authsvc's reply (see sync_user); a user made inactive in
      this Django project stays refused, as with TokenAuthentication;
    - authsvc refuses it, or it is malformed: 401 (AuthenticationFailed);
    - a live personal access token without the ``info`` scope: 403
      ``insufficient_scope`` (AuthsvcInsufficientScope), as authsvc answers;
    - a session that may only enrol a second factor (authsvc's
      --require-mfa): 403 ``mfa_enrollment_required``
      (AuthsvcEnrolmentRequired), never its user;
    - authsvc cannot be reached, times out, answers 5xx or anything that is
      not its answer: 503 (AuthsvcUnavailable), never an anonymous user.
    """

    keyword = "Token"

    def authenticate_credentials(self, key):
        kind = token_kind(key)
        if kind is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        try:
            info = fetch_info(key)
        except InvalidToken:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        except InsufficientScope:
            raise AuthsvcInsufficientScope()
        except EnrolmentRequired:
            raise AuthsvcEnrolmentRequired()
        except Unavailable as exc:
            logger.warning("authsvc could not check a token: %s", exc)
            raise AuthsvcUnavailable()
        user = sync_user(info)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return (user, AuthsvcToken(key, info, kind))

    def authenticate_header(self, request):
        return self.keyword
