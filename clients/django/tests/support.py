"""What the tests share: the package under test, the DRF app's database, a
real authsvc process, and stub servers that misbehave on purpose.

Environment:
  AUTHSVC_BIN              the authsvc binary; without it, `go build` from
                           the repository root
  AUTHSVC_DJANGO_INSTALLED 1: test the authsvc_django already on sys.path
                           (an installed copy), not the source folder
  AUTHSVC_REQUIRE_PYTHON=1 or CI: what would skip a test fails it instead
"""

import atexit
import base64
import contextlib
import hashlib
import hmac
import http.server
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)  # clients/django
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))

if os.environ.get("AUTHSVC_DJANGO_INSTALLED") != "1":
    sys.path.insert(0, PACKAGE_DIR)


def required():
    """Whether a missing prerequisite fails the tests rather than skipping them."""
    ci = os.environ.get("CI", "")
    return os.environ.get("AUTHSVC_REQUIRE_PYTHON") == "1" or ci not in ("", "0", "false")


def _tempdir(prefix):
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


_django_ready = False


def setup_django():
    """Configure the DRF app (drfapp.settings) on a new SQLite database."""
    global _django_ready
    if _django_ready:
        return
    os.environ["AUTHSVC_DJANGO_TEST_DIR"] = _tempdir("authsvc-django-db-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "drfapp.settings"
    import django
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    import authsvc_django

    where = os.path.dirname(os.path.abspath(authsvc_django.__file__))
    inside_source = where.startswith(PACKAGE_DIR + os.sep)
    if os.environ.get("AUTHSVC_DJANGO_INSTALLED") == "1" and inside_source:
        raise RuntimeError("AUTHSVC_DJANGO_INSTALLED=1 but authsvc_django comes from the source folder %s" % where)
    _django_ready = True


_binary = None


def authsvc_binary():
    global _binary
    if _binary is None:
        path = os.environ.get("AUTHSVC_BIN")
        if not path:
            go = shutil.which("go")
            if go is None:
                msg = "no authsvc binary: set AUTHSVC_BIN, or put go on PATH to build one"
                if required():
                    raise RuntimeError(msg)
                raise unittest.SkipTest(msg)
            path = os.path.join(_tempdir("authsvc-bin-"), "authsvc")
            subprocess.run([go, "build", "-o", path, "."], cwd=REPO, check=True)
        _binary = path
    return _binary


def _clean_env():
    # No AUTHSVC_* of the caller's (a CI's AUTHSVC_STORE, say) reaches the server.
    return {k: v for k, v in os.environ.items() if not k.startswith("AUTHSVC_")}


def cli(*args, stdin=""):
    """Run `authsvc ARGS...`; raise with its output when it fails."""
    proc = subprocess.run(
        [authsvc_binary(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=30,
    )
    if proc.returncode != 0:
        raise AssertionError("authsvc %s: exit %d\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


def add_user(users, username, password, admin=False, name="", email="", groups=()):
    args = ["user", "add", "--users", users, "--cost", "4"]
    if admin:
        args.append("--admin")
    if name:
        args += ["--name", name]
    if email:
        args += ["--email", email]
    for g in groups:
        args += ["--group", g]
    cli(*args, username, stdin=password + "\n")


def del_user(users, username):
    cli("user", "del", "--users", users, username)


class Authsvc:
    """An authsvc server on 127.0.0.1 and a port of its choosing, reading
    the users file `users` (bcrypt cost 4: fast logins, no rehash), with
    `extra` arguments after serve's own (e.g. ["--require-mfa", "admins"])."""

    def __init__(self, users, extra=()):
        self.users = users
        self.extra = list(extra)
        self.proc = None
        self.url = None
        self.log = []

    def start(self):
        self.proc = subprocess.Popen(
            [
                authsvc_binary(), "serve",
                "--addr", "127.0.0.1:0",
                "--users", self.users,
                "--cost", "4",
                "--log-format", "json",
                "--reload-interval", "100ms",
                *self.extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_clean_env(),
        )
        listening = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.log.append(line)
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "listening" and self.url is None:
                    self.url = "http://" + rec["addr"]
                    listening.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not listening.wait(20):
            self.stop()
            raise AssertionError("authsvc did not start:\n" + "".join(self.log))
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self._reader.join(5)
            self.proc.stderr.close()

    def reload(self, timeout=10):
        """Send SIGHUP and return once authsvc has reread the users file.

        Waiting matters: the file is also reread every 100 ms when it
        changes, so a test that edits it twice could otherwise act on a
        reload that saw only the first edit."""
        seen = len(self.log)
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log[seen:]:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("reason") == "SIGHUP" and rec.get("msg", "").startswith("users file re"):
                    if rec["msg"] != "users file reloaded":
                        raise AssertionError("authsvc refused the users file: " + line)
                    return
            time.sleep(0.02)
        raise AssertionError("authsvc did not reload within %ss" % timeout)

    def _call(self, method, path, token=None, body=None):
        headers = {}
        data = None
        if token is not None:
            headers["Authorization"] = "Token " + token
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, json.loads(raw) if raw else None

    def login_reply(self, username, password):
        """The whole 200 reply of a login (token, expires_at, user, and
        mfa_enrollment_required when --require-mfa makes it an enrolment
        session)."""
        status, body = self._call("POST", "/api/auth/login/", body={"username": username, "password": password})
        if status != 200:
            raise AssertionError("login %s: %d %r" % (username, status, body))
        return body

    def login(self, username, password):
        return self.login_reply(username, password)["token"]

    def enrol_totp(self, token, password):
        """Enrol and confirm an authenticator app with token, as its user's
        app would (POST /api/auth/mfa/totp/, then .../confirm/ with the
        current code)."""
        status, body = self._call("POST", "/api/auth/mfa/totp/", token=token, body={"password": password})
        if status != 200:
            raise AssertionError("mfa/totp: %d %r" % (status, body))
        code = totp(body["secret"], time.time())
        status, body = self._call("POST", "/api/auth/mfa/totp/confirm/", token=token, body={"code": code})
        if status != 200:
            raise AssertionError("mfa/totp/confirm: %d %r" % (status, body))

    def logout(self, token):
        return self._call("POST", "/api/auth/logout/", token=token)[0]

    def info(self, token):
        return self._call("GET", "/api/auth/info", token=token)

    def create_token(self, session, password, name, scopes):
        """Mint a personal access token as its user does (POST
        /api/auth/tokens/ with a session and the password); return the
        reply, whose "token" no other reply shows."""
        status, body = self._call("POST", "/api/auth/tokens/", token=session,
                                  body={"name": name, "scopes": scopes, "password": password})
        if status != 201:
            raise AssertionError("token create %s: %d %r" % (name, status, body))
        return body

    def revoke_token(self, session, token_id):
        return self._call("DELETE", "/api/auth/tokens/" + token_id, token=session)[0]

    def wait_info(self, token, pred, timeout=10):
        """Poll authsvc's own /info until pred(status, body) holds."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.info(token)
            if pred(status, body):
                return body
            if time.monotonic() > deadline:
                raise AssertionError("authsvc /info still %d %r" % (status, body))
            time.sleep(0.05)


def totp(secret, now):
    """The 6-digit TOTP code (RFC 6238: HMAC-SHA-1, 30-second steps) of the
    base32 secret at Unix time now."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    mac = hmac.new(key, struct.pack(">Q", int(now) // 30), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    number = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return "%06d" % (number % 1000000)


def close_pool():
    """Close this thread's pooled connections to authsvc."""
    from authsvc_django import authentication

    for client in list(authentication._clients.values()):
        client.close()


@contextlib.contextmanager
def captured_logs(name):
    """The messages logged on logger name (WARNING and up) inside the block."""
    messages = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def edit_users_file(path, username, **fields):
    """Change a user's profile in the users file as an operator's editor
    would (a new file renamed into place); the server reloads it."""
    with open(path) as f:
        data = json.load(f)
    for u in data["users"]:
        if u["username"] == username:
            u.update(fields)
            break
    else:
        raise AssertionError("no user %r in %s" % (username, path))
    tmp = path + ".edit"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


class Stub:
    """An HTTP/1.1 server that answers every request with handler(request)
    -> (status, body bytes), counting connections and recording requests.
    close_after_reply: close each connection after one reply without
    saying so, as a server does to an idle keep-alive connection."""

    def __init__(self, handler, close_after_reply=False):
        stub = self
        self.connections = 0
        self.requests = []  # (path, headers)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                stub.connections += 1

            def do_GET(self):
                stub.requests.append((self.path, dict(self.headers)))
                status, body = handler(self)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if close_after_reply:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def silent_listener():
    """A socket that accepts connections (the kernel's backlog) and never
    answers: a hung authsvc. Returns (url, socket)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return "http://127.0.0.1:%d" % sock.getsockname()[1], sock


def closed_port():
    """A 127.0.0.1 URL where nothing listens: connection refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return "http://127.0.0.1:%d" % port


# Personal access tokens authsvc's own tokens.NewPAT made (the checksum is
# its, not this package's), for the stubs: well-formed, live nowhere. The
# second and third have checksums padded with "0".
PATS = [
    "authsvc_pat_fKwJ6dguP2CTJsFEFyHnRPZNSIcDHR2i6iww",
    "authsvc_pat_PgGRVF0sfqfaNmPQwmtNawUr8xbWih0jrUY3",
    "authsvc_pat_r3hr8Z37ytXGkiQO8A5F4swcNsamvh00CRWZ",
]

INFO = {"username": "stubbed", "name": "Stub Bed", "email": "", "groups": [], "admin": False}
