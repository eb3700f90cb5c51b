"""API access: bearer tokens (constant time), Django staff sessions, read-only mode."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated
from rest_framework.exceptions import PermissionDenied as DRFPermissionDenied
from rest_framework.permissions import BasePermission

from conveyor.api.scopes import check_token
from conveyor.conf import conveyor_settings
from conveyor.permissions import missing_permission, refusal
from conveyor.tokens import auth_required, bearer_from_header, find_token

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class TokenUser:
    """The identity of a request authenticated by an API token."""

    is_authenticated = True
    is_staff = True
    is_active = True
    username = "api-token"

    def __str__(self) -> str:
        return self.username


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> Any:
        token = bearer_from_header(request.META.get("HTTP_AUTHORIZATION", ""))
        if token is None or not auth_required():
            # Auth off (no tokens configured): a token is ignored, as on the
            # Connect paths and the WebSockets, rather than refused.
            return None
        api_token = find_token(token)
        if api_token is not None:
            return (TokenUser(), api_token)  # request.auth: the token, with its scopes
        raise AuthenticationFailed("invalid bearer token")

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="conveyor"'


class ConveyorAccess(BasePermission):
    """Tokens or staff when auth is on; a token's scopes; read-only mode refuses admin mutations.

    A view marks what it does with ``mutating`` (True, or a set of HTTP
    methods); enqueue endpoints set ``producer = True`` and pass read-only.
    A staff session also needs the model permission of the view's
    ``resource`` (conveyor.permissions), as in the admin.
    """

    def has_permission(self, request: Any, view: Any) -> bool:
        if auth_required():
            user = request.user
            if not (user and user.is_authenticated):
                raise NotAuthenticated("a valid bearer token (or a staff login) is required")
            if not getattr(user, "is_staff", False):
                raise DRFPermissionDenied("staff access is required")
            if not isinstance(user, TokenUser):
                # A staff session: the admin's model permissions (conveyor.permissions).
                needed = missing_permission(user, permission_action(request.method, view), view.resource)
                if needed is not None:
                    raise DRFPermissionDenied(refusal(user, needed))
            else:
                check_token(request, view)  # a token: its scopes and queues (conveyor.api.scopes)
        if conveyor_settings.READ_ONLY and is_mutation(request.method, view):
            raise DRFPermissionDenied("the server is in read-only mode")
        return True


def permission_action(method: str, view: Any) -> str:
    """view (reads), add (enqueue), delete (a task's deletion) or change (every other act)."""
    if method in SAFE_METHODS:
        return "view"
    if getattr(view, "producer", False) and method == "POST":
        return "add"
    deletes = view.resource == "task" and (method == "DELETE" or view.kwargs.get("action") == "delete")
    return "delete" if deletes else "change"


def is_mutation(method: str, view: Any) -> bool:
    if method in SAFE_METHODS:
        return False
    if getattr(view, "producer", False) and method == "POST":
        return False  # enqueue: producers keep working in read-only mode
    mutating = getattr(view, "mutating", True)
    if isinstance(mutating, bool):
        return mutating
    return method in mutating
