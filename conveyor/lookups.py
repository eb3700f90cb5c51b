"""State filters written as SQL literals, so SQLite can use partial indexes.

SQLite uses a partial index only when the query's WHERE clause contains the
index's condition verbatim; a bound parameter (``state = ?``) never matches
``WHERE state = 'pending'``. These lookups render our fixed state names as
literals: ``state__is=State.ACTIVE`` and ``state__among=LEASABLE`` (the
tuple order must be the index's). Values are checked against ``[a-z_]+``.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Lookup

_NAME = re.compile(r"[a-z_]+")


def _literal(value: Any) -> str:
    text = str(value)
    if not _NAME.fullmatch(text):
        raise ValueError(f"not a state name: {text!r}")
    return f"'{text}'"


class Is(Lookup):
    lookup_name = "is"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} = {_literal(self.rhs)}", list(params)


class Among(Lookup):
    lookup_name = "among"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = self.process_lhs(compiler, connection)
        return f"{lhs} IN ({', '.join(_literal(v) for v in self.rhs)})", list(params)


def register(field: Any) -> None:
    field.register_lookup(Is)
    field.register_lookup(Among)
