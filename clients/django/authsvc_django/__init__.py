"""authsvc-django: a Django REST Framework authentication class that checks
``Authorization: Token <key>`` (a session, or a personal access token with
the ``info`` scope) against authsvc's ``GET /api/auth/info``.

Use ``authsvc_django.authentication.AuthsvcTokenAuthentication``; see the
package's README.md.
"""

__version__ = "0.3.0"
