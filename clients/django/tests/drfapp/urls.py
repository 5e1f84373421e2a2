from django.urls import path

from . import views

urlpatterns = [
    path("whoami/", views.WhoAmI.as_view()),
    path("admin-only/", views.AdminOnly.as_view()),
    path("open/", views.Open.as_view()),
]
