"""Views with DRF's permission classes as they ship."""

from rest_framework.permissions import AllowAny, IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView


def describe(user):
    return {
        "pk": user.pk,
        "username": user.username,
        "is_staff": user.is_staff,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "groups": sorted(user.groups.values_list("name", flat=True)),
    }


class WhoAmI(APIView):
    permission_classes = [IsAuthenticated]

    def get(self, request):
        return Response(describe(request.user))


class AdminOnly(APIView):
    permission_classes = [IsAdminUser]

    def get(self, request):
        return Response({"admin": request.user.username})


class Open(APIView):
    """Anyone may call it: a failure to authenticate must still not reach
    it as an anonymous user."""

    permission_classes = [AllowAny]

    def get(self, request):
        return Response({"anonymous": request.user.is_anonymous})
