#!/usr/bin/python3
"""Make password-hash vectors with Django 4.2's own hashers, for authsvc's tests.

    PYTHONPATH=$DJ42 /usr/bin/python3 make_vectors.py > vectors.json
    PYTHONPATH=$DJ42 /usr/bin/python3 make_vectors.py --verify vectors.json

$DJ42 is Debian trixie's python3-django 4.2 unpacked, with bookworm's
python3-argon2 and python3-bcrypt installed (README.md says how). The tests
read vectors.json and never need Python.

Every vector is made by Django's own hasher (its `encode` with small
parameters, so the Go tests stay fast) and checked with Django's own
`check_password`: each "match" password matches, each "miss" does not.
The argon2i vectors are made as Django's older Argon2PasswordHasher made
them (argon2-cffi's `low_level.hash_secret`, type I, prefixed `argon2`):
Django 4.2 only verifies that variant.

"never" lists hashes that Django's `check_password` refuses for the password
they were made from, or raises on: authsvc refuses them at load and at
import. "django" says what Django did.
"""
import base64
import json
import sys
import warnings

warnings.filterwarnings("ignore")  # the deprecated legacy hashers

import django
from django.conf import settings

settings.configure(
    PASSWORD_HASHERS=[
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
        "django.contrib.auth.hashers.Argon2PasswordHasher",
        "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
        "django.contrib.auth.hashers.BCryptPasswordHasher",
        "django.contrib.auth.hashers.ScryptPasswordHasher",
        "django.contrib.auth.hashers.SHA1PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.UnsaltedSHA1PasswordHasher",
        "django.contrib.auth.hashers.UnsaltedMD5PasswordHasher",
    ],
)
django.setup()

import argon2  # noqa: E402
import bcrypt  # noqa: E402
from django.contrib.auth import hashers  # noqa: E402
from django.contrib.auth.hashers import check_password  # noqa: E402
from django.utils.crypto import get_random_string  # noqa: E402

NUL = "a\x00b"
LONG = "ł" * 100  # 200 bytes: longer than any hash's block and bcrypt's 72
EDGE = ["", NUL, "mémoire-dure", LONG]  # each made into a hash of its own


def misses(pw):
    """Wrong passwords that are close to pw."""
    out = [pw + "x", pw.upper() if pw.upper() != pw else pw + " "]
    if pw:
        out.append(pw[:-1])
    if "\x00" in pw:
        out.append(pw.split("\x00")[0])  # a C string's view of it
    if len(pw.encode()) > 72:
        out.append(pw.encode()[:72].decode())  # what bcrypt would read of it
    return out


def vector(hasher, encoded, pw, extra_miss=()):
    return {"hasher": hasher, "hash": encoded, "match": [pw], "miss": misses(pw) + list(extra_miss)}


def argon2i(pw, salt, t=2, m=512, p=2, version=argon2.low_level.ARGON2_VERSION):
    return "argon2" + argon2.low_level.hash_secret(
        pw.encode(), salt.encode(), time_cost=t, memory_cost=m, parallelism=p,
        hash_len=16, type=argon2.low_level.Type.I, version=version).decode("ascii")


def make():
    pbkdf2_sha1 = hashers.PBKDF2SHA1PasswordHasher()
    scrypt = hashers.ScryptPasswordHasher()
    sha1 = hashers.SHA1PasswordHasher()
    md5 = hashers.MD5PasswordHasher()
    unsalted_sha1 = hashers.UnsaltedSHA1PasswordHasher()
    unsalted_md5 = hashers.UnsaltedMD5PasswordHasher()
    bcrypt_h = hashers.BCryptPasswordHasher()
    bcrypt_h.rounds = 4
    bcrypt_sha256 = hashers.BCryptSHA256PasswordHasher()
    bcrypt_sha256.rounds = 4

    vectors = []
    for pw in ["difference-engine-1822"] + EDGE:
        vectors.append(vector("pbkdf2_sha1", pbkdf2_sha1.encode(pw, pbkdf2_sha1.salt(), 1000), pw))
    vectors.append(vector("pbkdf2_sha1", pbkdf2_sha1.encode("contraseña", "sälz", 1000), "contraseña"))
    for pw in ["pascal-language-1970"] + EDGE:
        vectors.append(vector("argon2i", argon2i(pw, get_random_string(12)), pw))
    vectors.append(vector("argon2i", argon2i("grâce", get_random_string(16), t=1, m=64, p=1), "grâce"))
    for pw in ["mémoire-dure-scrypt-16"] + EDGE:
        vectors.append(vector("scrypt", scrypt.encode(pw, scrypt.salt(), n=2**10, r=8, p=1), pw))
    vectors.append(vector("scrypt", scrypt.encode("zoë", "sälz", n=2**4, r=1, p=3), "zoë"))
    vectors.append(vector("scrypt", scrypt.encode("two", scrypt.salt(), n=2, r=1, p=1), "two"))
    for name, h in [("sha1", sha1), ("md5", md5)]:
        for pw in ["world-wide-web-1989"] + EDGE:
            vectors.append(vector(name, h.encode(pw, h.salt()), pw))
        vectors.append(vector(name, h.encode("contraseña", "sälz"), "contraseña"))
    for pw in ["c-with-classes-1979"] + EDGE:
        vectors.append(vector("unsalted_sha1", unsalted_sha1.encode(pw, ""), pw))
    for pw in ["benevolent-dictator-1991"] + EDGE:
        vectors.append(vector("unsalted_md5", unsalted_md5.encode(pw, ""), pw))
        vectors.append(vector("unsalted_md5", "md5$$" + unsalted_md5.encode(pw, ""), pw))
    # bcrypt reads 72 bytes; bcrypt_sha256 all of them.
    p72 = "p" * 72
    vectors.append({"hasher": "bcrypt", "hash": bcrypt_h.encode(p72, bcrypt_h.salt()),
                    "match": [p72, p72 + "x"], "miss": [p72[:71], "P" + p72[1:]]})
    for pw in ["", "unix-timesharing-1969"]:
        vectors.append(vector("bcrypt", bcrypt_h.encode(pw, bcrypt_h.salt()), pw))
    for pw in ["", NUL, LONG]:
        vectors.append(vector("bcrypt_sha256", bcrypt_sha256.encode(pw, bcrypt_sha256.salt()), pw))

    never = []

    def refused(hasher, encoded, pw, why):
        never.append({"hasher": hasher, "hash": encoded, "password": pw, "why": why})

    s = scrypt.encode("pw", "saltsalt", n=2**10, r=8, p=1)
    f = s.split("$")
    refused("scrypt", "$".join([f[0], str(2**15)] + f[2:]), "pw", "N=2^15, r=8: beyond OpenSSL's 32 MiB")
    refused("scrypt", "$".join([f[0], "1000"] + f[2:]), "pw", "N not a power of 2")
    refused("scrypt", "$".join([f[0], "0"] + f[2:]), "pw", "N=0: Django takes its default and writes 16384")
    refused("scrypt", "$".join([f[0], "01024"] + f[2:]), "pw", "N with a leading zero: Django writes 1024")
    refused("scrypt", "$".join(f[:3] + ["0"] + f[4:]), "pw", "r=0: Django takes its default 8")
    refused("scrypt", "$".join(f[:5] + [f[5].rstrip("=")]), "pw", "digest without its padding")
    refused("scrypt", "$".join([f[0], f[1], ""] + f[3:]), "pw", "empty salt")
    p = pbkdf2_sha1.encode("pw", "salt", 1000)
    refused("pbkdf2_sha1", p.replace("$1000$", "$01000$"), "pw", "iterations with a leading zero")
    refused("pbkdf2_sha1", p.replace("pbkdf2_sha1$1000$salt$", "pbkdf2_sha1$1000$$"), "pw", "empty salt")
    refused("pbkdf2_sha1", pbkdf2_sha1.encode("pw", "salt", 1000).replace("pbkdf2_sha1", "pbkdf2_sha256"), "pw",
            "a SHA-1 digest under the SHA-256 name")
    refused("argon2i", argon2i("pw", "saltsalt", version=0x10), "pw",
            "argon2 1.0 (no v=): Django matches it, authsvc refuses it (x/crypto has only v=19); "
            "Django never wrote one (its argon2 hasher needed argon2-cffi 16.1, which writes v=19)")
    a = argon2i("pw", "saltsalt")
    refused("argon2i", a.replace("$argon2i$", "$argon2d$"), "pw", "argon2d: Django never wrote it")
    sh = sha1.encode("pw", "salt")
    refused("sha1", sh.upper().replace("SHA1$SALT$", "sha1$salt$"), "pw", "upper-case hex")
    refused("sha1", "sha1$$" + sh.split("$")[2] + "0", "pw", "sha1$$ not 46 long: an empty salt, Django raises")
    refused("md5", "md5$$" + md5.encode("pw", "salt").split("$")[2][:31], "pw", "md5$$ not 37 long: an empty salt, Django raises")
    refused("unsalted_md5", unsalted_md5.encode("pw", "").upper(), "pw", "upper-case hex")
    refused("unsalted_sha1", "unsalted_sha1$" + unsalted_sha1.encode("pw", ""), "pw",
            "the algorithm's own name: Django writes sha1$$")
    return vectors, never


def verify(vectors, never):
    for v in vectors:
        for pw in v["match"]:
            assert check_password(pw, v["hash"]), (v, pw)
        for pw in v["miss"]:
            assert not check_password(pw, v["hash"]), (v, pw)
    for n in never:
        try:
            ok = check_password(n["password"], n["hash"])
        except Exception as e:  # noqa: BLE001  (Django lets the hasher's error through)
            n["django"] = "raises %s" % type(e).__name__
        else:
            n["django"] = "matches" if ok else "does not match"
        if n["django"] == "matches":
            assert "authsvc refuses" in n["why"], n


def main():
    if sys.argv[1:2] == ["--verify"]:
        with open(sys.argv[2], encoding="utf-8") as f:
            doc = json.load(f)
        verify(doc["vectors"], doc["never"])
        print("ok: %d vectors, %d refused" % (len(doc["vectors"]), len(doc["never"])), file=sys.stderr)
        return
    vectors, never = make()
    verify(vectors, never)
    doc = {
        "made_by": {
            "django": django.get_version(),
            "argon2-cffi": argon2.__version__,
            "bcrypt": bcrypt.__version__,
            "python": sys.version.split()[0],
        },
        "vectors": vectors,
        "never": never,
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
