"""The connection to authsvc, against stub servers that do what a real one
should not: 5xx, time-outs, foreign replies, closed keep-alive connections.
Whatever goes wrong is a 503 from the DRF app, never a 401/403 or an
anonymous user."""

import json
import threading
import time
import unittest

import support

support.setup_django()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from authsvc_django import authentication  # noqa: E402
from authsvc_django.client import InfoClient, InvalidToken, Unavailable  # noqa: E402

KEY = "0123456789abcdef0123456789abcdef01234567"
INFO_BODY = json.dumps(support.INFO).encode()

# Personal access tokens authsvc refuses before any look-up: each is
# support.PATS[0] with one thing wrong.
_PAT = support.PATS[0]
BAD_PATS = [
    _PAT[:-1] + "x",  # the checksum does not match
    _PAT[:-7] + _PAT[-6:] + _PAT[-7],  # random and checksum swapped at the seam
    _PAT[:-1],  # one short
    _PAT + "0",  # one long
    "authsvc_pak_" + _PAT[12:],  # another prefix
    _PAT.upper(),
    _PAT[:20] + "_" + _PAT[21:],  # not base62
    _PAT[:20] + "\u00b2" + _PAT[21:],  # "²" is a digit to Python, not to authsvc
]


def reply(status, body):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    return lambda request: (status, body)


def tearDownModule():
    support.close_pool()


class ThroughDRFTest(unittest.TestCase):
    """A misbehaving authsvc, seen through the DRF app."""

    def call(self, url, path="/whoami/", timeout=2.0):
        with override_settings(AUTHSVC={"URL": url, "TIMEOUT": timeout}):
            return Client().get(path, HTTP_AUTHORIZATION="Token " + KEY)

    def assert503(self, resp):
        self.assertEqual(resp.status_code, 503, resp.content)
        self.assertEqual(resp["Retry-After"], "1")
        self.assertFalse(resp.has_header("WWW-Authenticate"))

    def stub(self, handler, **kw):
        s = support.Stub(handler, **kw)
        self.addCleanup(s.close)
        return s

    def test_5xx_is_503(self):
        for status, body in [
            (500, {"detail": "A server error occurred.", "code": "internal_error"}),
            (502, b"<html>Bad Gateway</html>"),
            (503, {"detail": "Service unavailable.", "code": "unavailable"}),
            (504, b""),
        ]:
            with self.subTest(status=status):
                s = self.stub(reply(status, body))
                for path in ["/whoami/", "/admin-only/", "/open/"]:
                    self.assert503(self.call(s.url, path))

    def test_connection_refused_is_503(self):
        url = support.closed_port()
        for path in ["/whoami/", "/open/"]:
            self.assert503(self.call(url, path))

    def test_hung_authsvc_is_503_within_the_timeout(self):
        url, sock = support.silent_listener()
        self.addCleanup(sock.close)
        start = time.monotonic()
        self.assert503(self.call(url, "/open/", timeout=0.3))
        self.assertLess(time.monotonic() - start, 2.0)

    def test_replies_that_are_not_authsvcs_are_503(self):
        for status, body in [
            (200, b"not json"),
            (200, {"username": "x"}),  # fields missing
            (200, dict(support.INFO, admin="yes")),  # wrong type
            (200, dict(support.INFO, username="")),
            (200, []),
            (401, b"<html>proxy says no</html>"),  # not authsvc's 401
            (401, {"detail": "?", "code": "something_else"}),
            (403, {"detail": "?", "code": "permission_denied"}),
            (403, {"detail": "?", "code": "mfa_enrolment_required"}),  # not authsvc's spelling
            (403, {"detail": "?"}),
            (403, b"<html>a proxy's 403</html>"),
            (404, {"detail": "Not found.", "code": "not_found"}),
            (429, {"detail": "?", "code": "throttled"}),
            (302, b""),
        ]:
            with self.subTest(status=status, body=body):
                s = self.stub(reply(status, body))
                self.assert503(self.call(s.url, "/open/"))

    def test_oversized_reply_is_503(self):
        big = dict(support.INFO, name="x" * 70000)
        s = self.stub(reply(200, big))
        self.assert503(self.call(s.url, "/open/"))

    def test_authsvcs_401_is_401(self):
        for code in ["invalid_token", "not_authenticated"]:
            with self.subTest(code=code):
                s = self.stub(reply(401, {"detail": "Invalid token.", "code": code}))
                for path in ["/whoami/", "/open/"]:
                    resp = self.call(s.url, path)
                    self.assertEqual(resp.status_code, 401, resp.content)
                    self.assertEqual(resp["WWW-Authenticate"], "Token")

    def test_authsvcs_insufficient_scope_is_403(self):
        s = self.stub(reply(403, {"detail": "This token's scopes do not cover this endpoint.", "code": "insufficient_scope"}))
        for path in ["/whoami/", "/open/"]:
            with override_settings(AUTHSVC={"URL": s.url}):
                resp = Client().get(path, HTTP_AUTHORIZATION="Token " + support.PATS[0])
            self.assertEqual(resp.status_code, 403, resp.content)
            self.assertFalse(resp.has_header("WWW-Authenticate"))

    def test_authsvcs_mfa_enrollment_required_is_403(self):
        s = self.stub(reply(403, {"detail": "A second factor is required.", "code": "mfa_enrollment_required"}))
        for path in ["/whoami/", "/admin-only/", "/open/"]:
            with self.subTest(path=path):
                with support.captured_logs("authsvc_django") as logs:
                    resp = self.call(s.url, path)
                self.assertEqual(resp.status_code, 403, resp.content)
                self.assertEqual(resp.data["detail"].code, "mfa_enrollment_required")
                self.assertEqual(resp.json(), {"detail": "A second factor is required: enrol one at the authentication service first."})
                self.assertFalse(resp.has_header("WWW-Authenticate"))
                self.assertFalse(resp.has_header("Retry-After"))
                self.assertFalse(resp.wsgi_request.user.is_authenticated)
                self.assertEqual(logs, [])

    def test_mfa_enrollment_required_is_not_cached(self):
        s = self.stub(reply(403, {"detail": "?", "code": "mfa_enrollment_required"}))
        with override_settings(AUTHSVC={"URL": s.url, "CACHE_SECONDS": 3600}):  # a cache of its own
            for _ in range(3):
                self.assertEqual(Client().get("/whoami/", HTTP_AUTHORIZATION="Token " + KEY).status_code, 403)
        self.assertEqual(len(s.requests), 3, "each request asks authsvc again")

    def test_personal_access_token_reaches_authsvc(self):
        s = self.stub(reply(200, support.INFO))
        with override_settings(AUTHSVC={"URL": s.url}):
            for pat in support.PATS:
                resp = Client().get("/whoami/", HTTP_AUTHORIZATION="Token " + pat)
                self.assertEqual(resp.status_code, 200, (pat, resp.content))
                self.assertEqual(resp.wsgi_request.auth.kind, "pat")
                self.assertEqual(s.requests[-1][1]["Authorization"], "Token " + pat)
        self.assertEqual(len(s.requests), len(support.PATS))

    def test_request_shape(self):
        s = self.stub(reply(200, support.INFO))
        resp = self.call(s.url + "/auth/", "/whoami/")  # a base URL with a path
        self.assertEqual(resp.status_code, 200, resp.content)
        self.assertEqual(resp.json()["username"], "stubbed")
        path, headers = s.requests[-1]
        self.assertEqual(path, "/auth/api/auth/info")  # no ?username=: the token's own user
        self.assertEqual(headers["Authorization"], "Token " + KEY)

    def test_malformed_key_never_reaches_authsvc(self):
        s = self.stub(reply(200, support.INFO))
        with override_settings(AUTHSVC={"URL": s.url}):
            for key in ["abc", KEY.upper(), KEY + "0", KEY[:-1] + "\u00e9"] + BAD_PATS:
                resp = Client().get("/whoami/", HTTP_AUTHORIZATION="Token " + key)
                self.assertEqual(resp.status_code, 401, (key, resp.content))
        self.assertEqual(s.requests, [])


class PoolTest(unittest.TestCase):
    def stub(self, handler, **kw):
        s = support.Stub(handler, **kw)
        self.addCleanup(s.close)
        return s

    def test_keep_alive_connection_is_reused(self):
        s = self.stub(reply(200, support.INFO))
        c = InfoClient(s.url, 2.0)
        self.addCleanup(c.close)
        for _ in range(5):
            self.assertEqual(c.info(KEY), support.INFO)
        self.assertEqual(s.connections, 1)
        # 401s keep the connection too
        s2 = self.stub(reply(401, {"detail": "Invalid token.", "code": "invalid_token"}))
        c2 = InfoClient(s2.url, 2.0)
        self.addCleanup(c2.close)
        for _ in range(3):
            with self.assertRaises(InvalidToken):
                c2.info(KEY)
        self.assertEqual(s2.connections, 1)

    def test_connection_closed_while_idle_is_replaced(self):
        s = self.stub(reply(200, support.INFO), close_after_reply=True)
        c = InfoClient(s.url, 2.0)
        self.addCleanup(c.close)
        for _ in range(4):
            self.assertEqual(c.info(KEY), support.INFO)
            time.sleep(0.05)  # let the server close it
        self.assertEqual(s.connections, 4)

    def test_one_connection_per_thread(self):
        s = self.stub(reply(200, support.INFO))
        c = InfoClient(s.url, 2.0)
        errors = []

        def work():
            try:
                for _ in range(5):
                    c.info(KEY)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                c.close()

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(s.connections, 3)

    def test_oversized_reply_does_not_spoil_the_connection(self):
        big = json.dumps(dict(support.INFO, name="x" * 70000)).encode()
        replies = iter([(200, big)])
        s = self.stub(lambda request: next(replies, (200, INFO_BODY)))
        c = InfoClient(s.url, 2.0)
        self.addCleanup(c.close)
        with self.assertRaises(Unavailable):
            c.info(KEY)
        self.assertEqual(c.info(KEY), support.INFO)  # not the rest of the big one

    def test_time_out_is_unavailable(self):
        url, sock = support.silent_listener()
        self.addCleanup(sock.close)
        c = InfoClient(url, 0.2)
        self.addCleanup(c.close)
        start = time.monotonic()
        with self.assertRaises(Unavailable):
            c.info(KEY)
        self.assertLess(time.monotonic() - start, 1.5)


class SettingsTest(unittest.TestCase):
    def test_bad_settings_are_refused(self):
        for conf in [
            None,
            {},  # no URL
            {"URL": "ftp://127.0.0.1"},
            {"URL": "http://127.0.0.1:8080?x=1"},
            {"URL": "http://127.0.0.1:8080", "TIMEOUT": 0},
            {"URL": "http://127.0.0.1:8080", "CACHE_SECONDS": -1},
            {"URL": "http://127.0.0.1:8080", "CACHE_SECONDS": 5, "CACHE_MAX_ENTRIES": 0},
            {"URL": "http://127.0.0.1:8080", "CACHE_SECOND": 5},  # a typo
        ]:
            with self.subTest(conf=conf):
                with override_settings(AUTHSVC=conf):
                    with self.assertRaises(ImproperlyConfigured):
                        authentication.fetch_info(KEY)


if __name__ == "__main__":
    unittest.main()
