"""AuthsvcTokenAuthentication in a small DRF app against a real authsvc:
tokens from authsvc's login, revoked through its logout, users changed with
its CLI and its users file, and the server stopped."""

import os
import shutil
import tempfile
import time
import unittest

import support

support.setup_django()

from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from authsvc_django import client as client_module  # noqa: E402

User = get_user_model()

PASSWORDS = {
    "alice": "alice-long-password-1",
    "root": "root-long-password-22",
    "carol": "carol-long-password-3",
    "dave": "dave-long-password-44",
    "erin": "erin-long-password-55",
    "frank": "frank-long-password-6",
}

server = None
users_file = None
tmp = None


def setUpModule():
    global server, users_file, tmp
    tmp = tempfile.mkdtemp(prefix="authsvc-django-test-")
    users_file = os.path.join(tmp, "users.json")
    support.add_user(users_file, "alice", PASSWORDS["alice"], name="Alice Liddell Smith",
                     email="alice@example.com", groups=["dev", "ops"])
    support.add_user(users_file, "root", PASSWORDS["root"], admin=True, name="Root",
                     email="root@example.com", groups=["admins"])
    support.add_user(users_file, "carol", PASSWORDS["carol"], name="Carol Jones", groups=["dev"])
    support.add_user(users_file, "dave", PASSWORDS["dave"], name="Dave", groups=["blue", "green"])
    support.add_user(users_file, "erin", PASSWORDS["erin"], name="Erin Old", email="erin@old.example",
                     groups=["red", "green"])
    support.add_user(users_file, "frank", PASSWORDS["frank"], name="Frank")
    server = support.Authsvc(users_file).start()


def tearDownModule():
    support.close_pool()
    if server is not None:
        server.stop()
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


def token_header(key):
    return {"HTTP_AUTHORIZATION": "Token " + key}


class AuthsvcTestCase(unittest.TestCase):
    """Every test talks to the module's authsvc, without a cache unless it
    says otherwise."""

    conf = {}

    def setUp(self):
        settings = {"URL": server.url, "TIMEOUT": 2.0}
        settings.update(self.conf)
        override = override_settings(AUTHSVC=settings)
        override.enable()
        self.addCleanup(override.disable)
        self.client = Client()

    def login(self, username):
        return server.login(username, PASSWORDS[username])

    def get(self, path, key=None, **extra):
        if key is not None:
            extra.update(token_header(key))
        return self.client.get(path, **extra)


class LiveTokenTest(AuthsvcTestCase):
    def test_live_token_gives_the_synced_django_user(self):
        key = self.login("alice")
        resp = self.get("/whoami/", key)
        self.assertEqual(resp.status_code, 200, resp.content)
        user = User.objects.get(username="alice")
        # request.user is that Django user, as the view saw it
        self.assertIsInstance(resp.wsgi_request.user, User)
        self.assertEqual(resp.wsgi_request.user.pk, user.pk)
        self.assertEqual(resp.json(), {
            "pk": user.pk,
            "username": "alice",
            "is_staff": False,
            "first_name": "Alice",  # split on the first space
            "last_name": "Liddell Smith",
            "email": "alice@example.com",
            "groups": ["dev", "ops"],
        })
        self.assertFalse(user.has_usable_password())
        self.assertFalse(user.is_superuser)
        self.assertTrue(Group.objects.filter(name="ops").exists())
        # the same token again: the same user, nothing duplicated
        resp = self.get("/whoami/", key)
        self.assertEqual(resp.status_code, 200)
        self.assertEqual(resp.json()["pk"], user.pk)
        self.assertEqual(User.objects.filter(username="alice").count(), 1)

    def test_request_auth_carries_the_key_and_info(self):
        key = self.login("carol")
        resp = self.get("/whoami/", key)
        self.assertEqual(resp.status_code, 200, resp.content)
        # DRF copies request.auth onto the Django request too
        auth = resp.wsgi_request.auth
        self.assertEqual(auth.key, key)
        self.assertEqual(auth.info["username"], "carol")
        self.assertEqual(auth.info["groups"], ["dev"])

    def test_admin_only_view(self):
        alice = self.login("alice")
        resp = self.get("/admin-only/", alice)
        self.assertEqual(resp.status_code, 403, resp.content)
        root = self.login("root")
        resp = self.get("/admin-only/", root)
        self.assertEqual(resp.status_code, 200, resp.content)
        self.assertEqual(resp.json(), {"admin": "root"})
        user = User.objects.get(username="root")
        self.assertTrue(user.is_staff)
        self.assertEqual(sorted(user.groups.values_list("name", flat=True)), ["admins"])

    def test_locally_inactive_user_is_refused(self):
        key = self.login("frank")
        self.assertEqual(self.get("/whoami/", key).status_code, 200)
        User.objects.filter(username="frank").update(is_active=False)
        try:
            resp = self.get("/whoami/", key)
            self.assertEqual(resp.status_code, 401, resp.content)
        finally:
            User.objects.filter(username="frank").update(is_active=True)


class RefusedTest(AuthsvcTestCase):
    def test_no_header_is_401_with_token_challenge(self):
        resp = self.get("/whoami/")
        self.assertEqual(resp.status_code, 401, resp.content)
        self.assertEqual(resp["WWW-Authenticate"], "Token")

    def test_other_scheme_is_not_ours(self):
        resp = self.get("/whoami/", HTTP_AUTHORIZATION="Basic YWxpY2U6eA==")
        self.assertEqual(resp.status_code, 401, resp.content)
        self.assertEqual(resp["WWW-Authenticate"], "Token")
        # and an open view sees an anonymous user, as with DRF's own class
        resp = self.get("/open/", HTTP_AUTHORIZATION="Basic YWxpY2U6eA==")
        self.assertEqual(resp.json(), {"anonymous": True})

    def test_unknown_key_is_401(self):
        resp = self.get("/whoami/", "0123456789abcdef0123456789abcdef01234567")
        self.assertEqual(resp.status_code, 401, resp.content)
        self.assertEqual(resp["WWW-Authenticate"], "Token")
        # an open view is refused too: a bad token is an error, not anonymity
        resp = self.get("/open/", "0123456789abcdef0123456789abcdef01234567")
        self.assertEqual(resp.status_code, 401, resp.content)

    def test_malformed_keys_are_401(self):
        for header in [
            "Token",
            "Token abc",
            "Token " + "A" * 40,  # upper case is not a token
            "Token " + "0" * 41,
            "Token " + "0" * 40 + " x",
        ]:
            with self.subTest(header=header):
                resp = self.get("/whoami/", HTTP_AUTHORIZATION=header)
                self.assertEqual(resp.status_code, 401, resp.content)
                self.assertEqual(resp["WWW-Authenticate"], "Token")

    def test_logged_out_token_is_refused_on_the_next_request(self):
        key = self.login("alice")
        self.assertEqual(self.get("/whoami/", key).status_code, 200)
        self.assertEqual(server.logout(key), 204)
        resp = self.get("/whoami/", key)
        self.assertEqual(resp.status_code, 401, resp.content)
        self.assertEqual(resp["WWW-Authenticate"], "Token")


class PersonalAccessTokenTest(AuthsvcTestCase):
    """Personal access tokens minted through authsvc's POST /api/auth/tokens/."""

    def mint(self, username, scopes):
        session = self.login(username)
        reply = server.create_token(session, PASSWORDS[username], self.id() + " " + " ".join(scopes), scopes)
        return session, reply

    def test_info_scope_authenticates_like_a_session(self):
        _, reply = self.mint("alice", ["info"])
        pat = reply["token"]
        self.assertTrue(pat.startswith("authsvc_pat_"), pat)
        resp = self.get("/whoami/", pat)
        self.assertEqual(resp.status_code, 200, resp.content)
        by_session = self.get("/whoami/", self.login("alice"))
        self.assertEqual(resp.json(), by_session.json(), "the same Django user, synced the same way")
        auth = resp.wsgi_request.auth
        self.assertEqual((auth.key, auth.kind, auth.info["username"]), (pat, "pat", "alice"))
        self.assertEqual(by_session.wsgi_request.auth.kind, "session")

    def test_admins_token_passes_is_admin_user(self):
        _, reply = self.mint("root", ["info", "admin"])
        resp = self.get("/admin-only/", reply["token"])
        self.assertEqual(resp.status_code, 200, resp.content)
        self.assertEqual(resp.json(), {"admin": "root"})

    def test_without_info_scope_is_403_insufficient_scope(self):
        _, reply = self.mint("carol", ["introspect"])
        for path in ["/whoami/", "/open/"]:  # never an anonymous user
            with self.subTest(path=path):
                resp = self.get(path, reply["token"])
                self.assertEqual(resp.status_code, 403, resp.content)
                self.assertEqual(resp.json(), {"detail": "This token's scopes do not cover this service."})
                self.assertFalse(resp.has_header("WWW-Authenticate"))
                self.assertFalse(resp.wsgi_request.user.is_authenticated)

    def test_revoked_token_is_refused_on_the_next_request(self):
        session, reply = self.mint("alice", ["info"])
        self.assertEqual(self.get("/whoami/", reply["token"]).status_code, 200)
        self.assertEqual(server.revoke_token(session, reply["id"]), 204)
        resp = self.get("/whoami/", reply["token"])
        self.assertEqual(resp.status_code, 401, resp.content)
        self.assertEqual(resp["WWW-Authenticate"], "Token")

    def test_unknown_token_with_a_good_checksum_is_401(self):
        for pat in support.PATS:
            with self.subTest(pat=pat):
                resp = self.get("/whoami/", pat)
                self.assertEqual(resp.status_code, 401, resp.content)
                self.assertEqual(resp["WWW-Authenticate"], "Token")


class CacheTest(AuthsvcTestCase):
    conf = {"CACHE_SECONDS": 30}

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self.addCleanup(setattr, client_module, "monotonic", client_module.monotonic)
        client_module.monotonic = lambda: self.now

    def session_revoked_by_logout(self):
        key = self.login("carol")
        return key, lambda: self.assertEqual(server.logout(key), 204)

    def pat_revoked_by_delete(self):
        session = self.login("carol")
        reply = server.create_token(session, PASSWORDS["carol"], "cache " + str(self.now), ["info"])
        return reply["token"], lambda: self.assertEqual(server.revoke_token(session, reply["id"]), 204)

    def test_revoked_token_refused_once_the_cache_time_passes(self):
        # A personal access token lives in the cache no longer than a session.
        for kind, make in [("session", self.session_revoked_by_logout), ("pat", self.pat_revoked_by_delete)]:
            with self.subTest(kind=kind):
                key, revoke = make()
                self.assertEqual(self.get("/whoami/", key).status_code, 200)
                revoke()
                self.now += 29
                self.assertEqual(self.get("/whoami/", key).status_code, 200, "within CACHE_SECONDS: the cached answer")
                self.now += 1
                resp = self.get("/whoami/", key)
                self.assertEqual(resp.status_code, 401, resp.content)

    def test_insufficient_scope_is_not_cached(self):
        session = self.login("carol")
        reply = server.create_token(session, PASSWORDS["carol"], "not cached", ["introspect"])
        for _ in range(2):
            self.assertEqual(self.get("/whoami/", reply["token"]).status_code, 403)
        self.assertEqual(server.revoke_token(session, reply["id"]), 204)
        self.assertEqual(self.get("/whoami/", reply["token"]).status_code, 401, "asked again: now revoked")

    def test_a_refusal_is_not_cached(self):
        key = "fedcba9876543210fedcba9876543210fedcba98"
        self.assertEqual(self.get("/whoami/", key).status_code, 401)
        key = self.login("carol")
        self.assertEqual(self.get("/whoami/", key).status_code, 200)


class SyncTest(AuthsvcTestCase):
    def whoami(self, key):
        resp = self.get("/whoami/", key)
        self.assertEqual(resp.status_code, 200, resp.content)
        return resp.json()

    def test_profile_edited_in_authsvc_is_synced_on_the_next_request(self):
        key = self.login("dave")
        me = self.whoami(key)
        self.assertEqual((me["groups"], me["is_staff"], me["first_name"], me["last_name"]),
                         (["blue", "green"], False, "Dave", ""))
        self.assertEqual(self.get("/admin-only/", key).status_code, 403)

        support.edit_users_file(users_file, "dave", groups=["green", "violet"], admin=True,
                                name="David Bowman Jr", email="dave@example.com")
        server.reload()
        server.wait_info(key, lambda s, b: s == 200 and b["admin"])
        me = self.whoami(key)  # the same token: still live
        self.assertEqual(me["groups"], ["green", "violet"])  # exactly these: blue is gone
        self.assertEqual((me["is_staff"], me["first_name"], me["last_name"], me["email"]),
                         (True, "David", "Bowman Jr", "dave@example.com"))
        self.assertEqual(self.get("/admin-only/", key).status_code, 200)
        self.assertTrue(Group.objects.filter(name="blue").exists(), "groups are never deleted, only left")

        support.edit_users_file(users_file, "dave", groups=[], admin=False)
        server.reload()
        server.wait_info(key, lambda s, b: s == 200 and not b["admin"])
        me = self.whoami(key)
        self.assertEqual((me["groups"], me["is_staff"]), ([], False))
        self.assertEqual(self.get("/admin-only/", key).status_code, 403)

    def test_user_recreated_in_authsvc(self):
        old = self.login("erin")
        me = self.whoami(old)
        self.assertEqual((me["groups"], me["email"], me["last_name"]), (["green", "red"], "erin@old.example", "Old"))
        pk = me["pk"]

        support.del_user(users_file, "erin")
        support.add_user(users_file, "erin", PASSWORDS["erin"], admin=True, name="Erin New",
                         email="erin@new.example", groups=["red", "yellow"])
        server.reload()
        server.wait_info(old, lambda s, b: s == 401)
        self.assertEqual(self.get("/whoami/", old).status_code, 401, "the deleted user's token")

        new = self.login("erin")
        me = self.whoami(new)
        self.assertEqual(me["pk"], pk, "the same Django user, by username")
        self.assertEqual((me["groups"], me["is_staff"], me["first_name"], me["last_name"], me["email"]),
                         (["red", "yellow"], True, "Erin", "New", "erin@new.example"))


class EnrolmentTest(unittest.TestCase):
    """An authsvc of its own with --require-mfa admins: an admin without a
    second factor logs in to a session that may only enrol one, and /info
    answers it 403 mfa_enrollment_required."""

    PASSWORDS = {
        "gwen": "gwen-long-password-77",
        "ivy": "ivy-long-password-888",
        "hal": "hal-long-password-999",
    }
    DETAIL = "A second factor is required: enrol one at the authentication service first."

    @classmethod
    def setUpClass(cls):
        own_tmp = tempfile.mkdtemp(prefix="authsvc-django-mfa-")
        cls.addClassCleanup(shutil.rmtree, own_tmp, True)
        path = os.path.join(own_tmp, "users.json")
        support.add_user(path, "gwen", cls.PASSWORDS["gwen"], admin=True, name="Gwen")
        support.add_user(path, "ivy", cls.PASSWORDS["ivy"], admin=True, name="Ivy")
        support.add_user(path, "hal", cls.PASSWORDS["hal"], name="Hal")
        cls.server = support.Authsvc(path, extra=["--require-mfa", "admins"]).start()
        cls.addClassCleanup(cls.server.stop)

    def use(self, **conf):
        override = override_settings(AUTHSVC=dict({"URL": self.server.url, "TIMEOUT": 2.0}, **conf))
        override.enable()
        self.addCleanup(override.disable)
        return Client()

    def enrolment_session(self, username):
        reply = self.server.login_reply(username, self.PASSWORDS[username])
        self.assertIs(reply.get("mfa_enrollment_required"), True, reply)
        key = reply["token"]
        status, body = self.server.info(key)
        self.assertEqual((status, body["code"]), (403, "mfa_enrollment_required"), "authsvc's own answer")
        return key

    def assert_enrolment_required(self, resp):
        self.assertEqual(resp.status_code, 403, resp.content)
        self.assertEqual(resp.json(), {"detail": self.DETAIL})
        self.assertEqual(resp.data["detail"].code, "mfa_enrollment_required")
        self.assertFalse(resp.has_header("WWW-Authenticate"))
        self.assertFalse(resp.has_header("Retry-After"))
        self.assertFalse(resp.wsgi_request.user.is_authenticated)

    def test_enrolment_session_is_403_mfa_enrollment_required(self):
        c = self.use()
        key = self.enrolment_session("gwen")
        for path in ["/whoami/", "/admin-only/", "/open/"]:  # never its user, never anonymous
            with self.subTest(path=path):
                with support.captured_logs("authsvc_django") as logs:
                    resp = c.get(path, **token_header(key))
                self.assert_enrolment_required(resp)
                self.assertEqual(logs, [], "not an outage: nothing logged")
        self.assertFalse(User.objects.filter(username="gwen").exists(), "no Django user for an enrolment session")

    def test_user_the_policy_does_not_cover_is_authenticated(self):
        c = self.use()
        reply = self.server.login_reply("hal", self.PASSWORDS["hal"])
        self.assertNotIn("mfa_enrollment_required", reply)
        resp = c.get("/whoami/", **token_header(reply["token"]))
        self.assertEqual(resp.status_code, 200, resp.content)
        self.assertEqual(resp.json()["username"], "hal")

    def test_enrolment_refusal_is_not_cached(self):
        c = self.use(CACHE_SECONDS=30)
        now = 1000.0  # the cache's clock stands still: only a cached answer could repeat
        self.addCleanup(setattr, client_module, "monotonic", client_module.monotonic)
        client_module.monotonic = lambda: now
        key = self.enrolment_session("ivy")
        for _ in range(2):
            self.assert_enrolment_required(c.get("/whoami/", **token_header(key)))
        # Confirming an authenticator turns this very session into a full one.
        self.server.enrol_totp(key, self.PASSWORDS["ivy"])
        resp = c.get("/admin-only/", **token_header(key))
        self.assertEqual(resp.status_code, 200, "asked again: now a full session; %r" % resp.content)
        self.assertEqual(resp.json(), {"admin": "ivy"})


class StoppedTest(unittest.TestCase):
    """An authsvc of its own, stopped mid-test."""

    def test_stopped_authsvc_is_503_never_anonymous(self):
        own = support.Authsvc(users_file).start()
        self.addCleanup(own.stop)
        override = override_settings(AUTHSVC={"URL": own.url, "TIMEOUT": 2.0})
        override.enable()
        self.addCleanup(override.disable)
        c = Client()
        key = own.login("alice", PASSWORDS["alice"])
        self.assertEqual(c.get("/whoami/", **token_header(key)).status_code, 200)  # a pooled connection now

        own.stop()
        for path in ["/whoami/", "/admin-only/", "/open/"]:
            with self.subTest(path=path):
                start = time.monotonic()
                with support.captured_logs("authsvc_django") as logs:
                    resp = c.get(path, **token_header(key))
                self.assertEqual(resp.status_code, 503, resp.content)
                self.assertEqual(resp["Retry-After"], "1")
                self.assertFalse(resp.has_header("WWW-Authenticate"))
                self.assertLess(time.monotonic() - start, 5)
                self.assertFalse(resp.wsgi_request.user.is_authenticated)
                self.assertEqual(len(logs), 1, logs)  # a warning, without the token
                self.assertIn("authsvc could not check a token", logs[0])
                self.assertNotIn(key, logs[0])


if __name__ == "__main__":
    unittest.main()
