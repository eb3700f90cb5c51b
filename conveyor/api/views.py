"""The base of every REST view: JSON bodies only, errors documented."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ParseError, PermissionDenied, UnsupportedMediaType
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.views import APIView

from conveyor.api.auth import BearerTokenAuthentication, ConveyorAccess
from conveyor.api.errors import exception_handler
from conveyor.api.origin import cross_site_refusal, media_type
from conveyor.api.schemas import ConveyorSchema
from conveyor.broker.validation import check_storable


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, also refusing JSON nested too deep to parse (not a 500)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None


class ApiView(APIView):
    """Every policy is set here, not read from ``REST_FRAMEWORK``: in a host
    project that setting is the host's, and its defaults (AllowAny, Basic
    auth) must not open or reshape Conveyor's API."""

    # JSON only: a form post (which a browser sends cross-site without a
    # preflight) gets 415 instead of being read as a task.
    parser_classes = [StrictJSONParser]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]
    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    permission_classes = [ConveyorAccess]
    # The model whose permissions a staff session needs here (conveyor.permissions).
    resource = "task"
    schema = ConveyorSchema()

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        # Before authentication: another site's page is refused whoever it
        # is logged in as, and on a node with no tokens at all.
        meta = request.META
        content_type = meta.get("CONTENT_TYPE")
        refusal = cross_site_refusal(request.method, meta.get("HTTP_ORIGIN"), meta.get("HTTP_HOST"), content_type)
        if refusal is not None and refusal.status == 403:
            raise PermissionDenied(refusal.message)
        if refusal is not None:
            raise UnsupportedMediaType(media_type(content_type), refusal.message)
        # Ids in the path and filters in the query go to the database as
        # they are: one PostgreSQL cannot hold is a 400 naming it, not a 500.
        for name, value in kwargs.items():
            if isinstance(value, str):
                check_storable(value, name)
        for name, values in request.query_params.lists():
            for value in values:
                check_storable(value, name)
        super().initial(request, *args, **kwargs)

    def get_exception_handler(self) -> Any:
        return exception_handler
