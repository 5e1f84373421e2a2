"""A real SMTP server for internal/mail's tests: Debian's aiosmtpd.

Each message received is saved in --dir as NNN.eml (the data as sent)
and NNN.json (the envelope, and the user name it logged in with). With
--tls-cert/--tls-key the server offers STARTTLS and requires it, or with
--smtps speaks TLS from the first byte. With --user/--password (the
password read from the environment variable AUTHSVC_TEST_SMTP_PASSWORD,
not from the command line) it offers AUTH and requires it.

It prints "ready" once it accepts connections and runs until stdin closes
(the test ends) or it is killed.
"""

import argparse
import json
import os
import ssl
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class Saver:
    def __init__(self, directory):
        self.directory = directory
        self.count = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            base = os.path.join(self.directory, "%03d" % self.count)
        # Written under a temporary name first, so a test never reads half a file.
        with open(base + ".eml.tmp", "wb") as f:
            f.write(envelope.original_content)
        with open(base + ".json", "w") as f:
            json.dump({"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos,
                       "login": (session.auth_data.login.decode() if session.authenticated else None),
                       # session.ssl is set by STARTTLS only; smtps shows on the transport.
                       "tls": session.ssl is not None or server.transport.get_extra_info("ssl_object") is not None}, f)
        os.rename(base + ".eml.tmp", base + ".eml")
        return "250 Message accepted for delivery"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = auth_data.login == user.encode() and auth_data.password == password.encode()
        # auth_data kept: handle_DATA records who logged in.
        # handled=False: aiosmtpd then answers 535 itself (True means the
        # authenticator already replied, and the client would wait forever).
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)
    return check


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--smtps", action="store_true")
    p.add_argument("--user")
    a = p.parse_args()

    kwargs = {}
    if a.tls_cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        if a.smtps:
            kwargs["ssl_context"] = ctx
        else:
            kwargs["tls_context"] = ctx
            kwargs["require_starttls"] = True
    if a.user:
        kwargs["authenticator"] = authenticator(a.user, os.environ["AUTHSVC_TEST_SMTP_PASSWORD"])
        kwargs["auth_required"] = True
        # AUTH is offered only after STARTTLS, as a real submission server
        # does; smtps is TLS already, and a server without TLS offers it in clear.
        kwargs["auth_require_tls"] = bool(a.tls_cert) and not a.smtps

    controller = Controller(Saver(a.dir), hostname="127.0.0.1", port=a.port, **kwargs)
    controller.start()
    print("ready", flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
