"""Where the host mounted ``conveyor.urls``: the prefix every Conveyor URL shares."""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse


def prefix() -> str:
    """The path ``conveyor.urls`` is included at, e.g. ``"/"`` or ``"/conveyor/"``.

    Raise ``LookupError`` if the URLconf does not include it.
    """
    try:
        return reverse("conveyor:healthz").removesuffix("healthz")
    except NoReverseMatch:
        raise LookupError("conveyor.urls is not included in the URLconf") from None
