"""API authentication: bearer tokens (constant-time) and Django staff sessions."""

from __future__ import annotations

import hmac
from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from conveyor.conf import conveyor_settings


def token_valid(presented: str) -> bool:
    """Compare *presented* with every configured token in constant time."""
    ok = False
    for token in conveyor_settings.API_TOKENS:
        ok |= hmac.compare_digest(presented.encode(), token.encode())
    return ok


def auth_required() -> bool:
    return bool(conveyor_settings.API_TOKENS)


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> Any:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("bearer "):
            return None
        if token_valid(header[7:].strip()):
            return (TokenUser(), "bearer")
        from rest_framework.exceptions import AuthenticationFailed

        raise AuthenticationFailed("invalid bearer token")

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="conveyor"'


class TokenUser:
    is_authenticated = True
    is_staff = True
    is_active = True
    username = "api-token"

    def __str__(self) -> str:
        return self.username


class ConveyorAccess(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        if not auth_required():
            return True
        user = request.user
        return bool(user and user.is_authenticated and getattr(user, "is_staff", False))
