"""The base of every REST view: JSON bodies only, errors documented."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.views import APIView

from conveyor.api.auth import BearerTokenAuthentication, ConveyorAccess
from conveyor.api.errors import exception_handler
from conveyor.api.schemas import ConveyorSchema


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
    schema = ConveyorSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler
