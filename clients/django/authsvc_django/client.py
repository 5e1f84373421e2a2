"""Asking authsvc about a token (a session or a personal access token):
GET /api/auth/info over pooled connections.

Only the standard library: http.client keeps one keep-alive connection per
thread and authsvc address, with a time-out on connecting and on each read.
Nothing here knows about Django; authentication.py turns the outcomes into
DRF's answers.
"""

import collections
import hashlib
import http.client
import json
import ssl
import threading
import re
import time
import urllib.parse
import zlib

__all__ = [
    "EnrolmentRequired",
    "InfoClient",
    "InsufficientScope",
    "InvalidToken",
    "TokenCache",
    "Unavailable",
    "token_kind",
]

USER_AGENT = "authsvc-django/0.3"

# authsvc's /info reply is a few hundred bytes (100 groups of 150
# characters at most); anything much bigger is not authsvc.
MAX_BODY = 64 * 1024

# The 401 codes API.md lists for /info: anything else is not authsvc's
# answer about this token (a proxy's 401, say), so it decides nothing.
_TOKEN_CODES = frozenset(["invalid_token", "not_authenticated"])

# A keep-alive connection the server closed while it sat idle fails like
# this on its next request; the request never reached authsvc, so it is
# sent once more on a new connection.
_STALE = (
    http.client.RemoteDisconnected,
    http.client.BadStatusLine,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)

# The clock of the cache; tests move it.
monotonic = time.monotonic

# API.md, "Personal access tokens": a session is 40 lowercase hex
# characters; a personal access token is the prefix, 30 base62 characters
# and 6 more of their CRC-32 (IEEE), a big-endian base62 number padded with
# "0". [0-9] and friends are ASCII ranges: no other digit matches.
_SESSION_RE = re.compile(r"[0-9a-f]{40}")
_PAT_RE = re.compile(r"authsvc_pat_([0-9A-Za-z]{30})([0-9A-Za-z]{6})")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _pat_checksum(random):
    """The 6 base62 characters of the CRC-32 of random, as authsvc writes them."""
    n = zlib.crc32(random.encode("ascii"))
    digits = []
    for _ in range(6):
        n, d = divmod(n, 62)
        digits.append(_BASE62[d])
    return "".join(reversed(digits))


def token_kind(key):
    """"session" or "pat" when key has the form of an authsvc token of that
    kind (a personal access token's checksum matching), None otherwise:
    authsvc refuses such a key before any look-up, so it need not be
    asked, and a key with a line break never reaches a request line."""
    if _SESSION_RE.fullmatch(key):
        return "session"
    m = _PAT_RE.fullmatch(key)
    if m and _pat_checksum(m.group(1)) == m.group(2):
        return "pat"
    return None


class Unavailable(Exception):
    """authsvc could not say whether the token is live: unreachable, a
    time-out, a 5xx, or a reply that is not authsvc's."""


class InsufficientScope(Exception):
    """authsvc answered 403 insufficient_scope: a live personal access
    token without the ``info`` scope."""


class EnrolmentRequired(Exception):
    """authsvc answered 403 mfa_enrollment_required: a live session of a
    user --require-mfa covers who has no second factor yet. It may only
    enrol one at authsvc; until then it is nobody's token here."""


class InvalidToken(Exception):
    """authsvc answered 401: the token is unknown, revoked, expired or
    malformed. ``code`` is authsvc's error code."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def parse_url(url):
    """Return (scheme, host, port, path of /info) for authsvc's base URL,
    or raise ValueError."""
    if not isinstance(url, str) or not url:
        raise ValueError("URL must be a non-empty string such as http://127.0.0.1:8080")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("URL %r: the scheme must be http or https" % url)
    if not parts.hostname:
        raise ValueError("URL %r has no host" % url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("URL %r: credentials in the URL are not supported" % url)
    if parts.query or parts.fragment:
        raise ValueError("URL %r: a query or fragment is not supported" % url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("URL %r has a bad port" % url)
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    path = parts.path.rstrip("/") + "/api/auth/info"
    return parts.scheme, parts.hostname, port, path


def _valid_info(info):
    """Whether info has the shape of /info's 200 reply."""
    return (
        isinstance(info, dict)
        and isinstance(info.get("username"), str)
        and info["username"] != ""
        and isinstance(info.get("name"), str)
        and isinstance(info.get("email"), str)
        and isinstance(info.get("groups"), list)
        and all(isinstance(g, str) for g in info["groups"])
        and isinstance(info.get("admin"), bool)
    )


class InfoClient:
    """Asks one authsvc about tokens. Thread-safe: each thread keeps its own
    keep-alive connection, so a connection is never shared between
    requests in flight."""

    def __init__(self, url, timeout, ca_file=None):
        self.scheme, self.host, self.port, self.path = parse_url(url)
        self.timeout = timeout
        self._ssl = None
        if self.scheme == "https":
            self._ssl = ssl.create_default_context(cafile=ca_file)
        self._local = threading.local()

    def _new_connection(self):
        if self._ssl is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self._ssl
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._new_connection()
            self._local.conn = conn
        return conn

    def _drop(self):
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self):
        """Close this thread's connection."""
        self._drop()

    def info(self, key):
        """Return /info's reply for key (a dict), raise InvalidToken when
        authsvc refuses the token, InsufficientScope when it is a personal
        access token without the info scope, EnrolmentRequired when it is a
        session that may only enrol a second factor, or Unavailable when
        authsvc cannot be asked or does not decide."""
        headers = {
            "Authorization": "Token " + key,
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        for attempt in (1, 2):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request("GET", self.path, headers=headers)
                resp = conn.getresponse()
                body = resp.read(MAX_BODY + 1)
            except _STALE as exc:
                self._drop()
                if reused and attempt == 1:
                    continue  # a keep-alive connection closed while idle
                raise Unavailable("authsvc at %s:%d: %s" % (self.host, self.port, _describe(exc)))
            except (OSError, http.client.HTTPException) as exc:
                # refused, unreachable, a time-out (connect or read), TLS
                self._drop()
                raise Unavailable("authsvc at %s:%d: %s" % (self.host, self.port, _describe(exc)))
            if len(body) > MAX_BODY or not resp.isclosed():
                self._drop()  # unread bytes would spoil the next reply
                raise Unavailable("authsvc at %s:%d: reply over %d bytes" % (self.host, self.port, MAX_BODY))
            return self._decide(resp.status, body)
        raise AssertionError("unreachable")

    def _decide(self, status, body):
        where = "authsvc at %s:%d" % (self.host, self.port)
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            data = None
        if status == 200:
            if not _valid_info(data):
                raise Unavailable("%s: a 200 reply that is not /info's" % where)
            return data
        if status == 401:
            code = data.get("code") if isinstance(data, dict) else None
            if code in _TOKEN_CODES:
                raise InvalidToken(code)
            raise Unavailable("%s: a 401 without authsvc's error code" % where)
        code = data.get("code") if isinstance(data, dict) else None
        if status == 403 and code == "insufficient_scope":
            raise InsufficientScope()
        if status == 403 and code == "mfa_enrollment_required":
            raise EnrolmentRequired()
        raise Unavailable("%s: status %d%s" % (where, status, " (%s)" % code if isinstance(code, str) else ""))


def _describe(exc):
    text = str(exc)
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


class TokenCache:
    """Live tokens' /info replies for ttl seconds, at most max_entries of
    them (the oldest go first). Keys are SHA-256 digests, so the cache never
    holds a usable token. Only 200 replies are kept: a refused token (401,
    403 insufficient_scope or mfa_enrollment_required) is asked about again,
    and a token revoked in authsvc, session or personal access token alike,
    is refused at most ttl seconds later."""

    def __init__(self, ttl, max_entries):
        self.ttl = ttl
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries = collections.OrderedDict()  # digest -> (expires, info)

    @staticmethod
    def _digest(key):
        return hashlib.sha256(key.encode("ascii")).digest()

    def get(self, key):
        digest = self._digest(key)
        now = monotonic()
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            if now >= entry[0]:
                del self._entries[digest]
                return None
            return entry[1]

    def put(self, key, info):
        digest = self._digest(key)
        expires = monotonic() + self.ttl
        with self._lock:
            self._entries[digest] = (expires, info)
            self._entries.move_to_end(digest)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self):
        with self._lock:
            self._entries.clear()
