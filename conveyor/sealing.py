"""Encryption at rest: the node's keyring, and how a stored value is sealed and opened.

With ``CONVEYOR_ENCRYPTION_KEYS`` set, a task row's payload, result and
error text, and a cron entry's payload, are stored as AES-256-GCM envelopes
(the format of ``conveyor.sdk.encryption``) under the row's own key id, its
``key_id`` column: every sealed value of a row is under that one key, and a
row whose ``key_id`` is NULL holds plaintext (it was stored before the
keyring was set; ``manage.py conveyor keys rotate`` seals it). A new row
takes the active key (the keyring's first). Each envelope's associated
data names its column and row, so a value copied into another row or column
does not open.

The store seals on the way in (``conveyor.store.sealing``); what the
database gives back is opened where it is read: the store's own rows there,
model instances in ``Task.from_db``. A value that cannot be opened here
(its key is not in this keyring, or not the key it was sealed with) is
never handed on: the reader gets ``seal_error`` and empty values instead.

An error text is sealed as ``sealed:`` and the envelope in base64; texts
the server writes itself across many rows at once ("lease expired",
"task expired before dispatch", "canceled by failed dependency") hold no
data of the task's and are stored as they are, so an error text is opened
only when it carries the prefix.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

from conveyor.conf import conveyor_settings
from conveyor.exceptions import KeyUnavailable
from conveyor.sdk.encryption import AESGCM, EncryptionError, Key, is_marked, key_id_of

TEXT_PREFIX = "sealed:"
# The sealed columns of a task row, and the name each one's envelopes carry.
TASK_COLUMNS = {"payload": "task.payload", "result": "task.result", "last_error": "task.last_error"}
CRON_PAYLOAD = "cron.payload"
# An attempt's error text (conveyor_taskattempt.error): sealed under the
# attempt's key id, with its task's id as the row (an attempt's error does
# not open as the task's last_error, nor as another task's).
ATTEMPT_ERROR = "attempt.error"


@functools.lru_cache(maxsize=4)
def _ring(keys: tuple[tuple[str, bytes], ...]) -> AESGCM:
    return AESGCM([Key(key_id, secret) for key_id, secret in keys])


def keyring() -> AESGCM | None:
    """The node's keyring (``ENCRYPTION_KEYS``), or None when it has none."""
    keys = conveyor_settings.ENCRYPTION_KEYS
    return _ring(keys) if keys else None


def active_key_id() -> str | None:
    """The key id new rows are sealed under (None: rows are stored in plaintext)."""
    keys = conveyor_settings.ENCRYPTION_KEYS
    return keys[0][0] if keys else None


def context(column: str, row_id: str) -> bytes:
    """The associated data of a value: its column and its row."""
    return f"{column}\x00{row_id}".encode()


def _cipher_for(key_id: str, row_id: str, column: str) -> AESGCM:
    ring = keyring()
    if ring is None or not ring.holds(key_id):
        raise KeyUnavailable(
            f"{_what(column, row_id)} is sealed under key {key_id!r}, which is not in this node's "
            "CONVEYOR_ENCRYPTION_KEYS",
            key_id=key_id,
        )
    return ring


def _what(column: str, row_id: str) -> str:
    table, _, name = column.partition(".")
    return f"{'cron entry' if table == 'cron' else 'task'} {row_id}'s {name.replace('_', ' ')}"


def seal(key_id: str | None, value: bytes | memoryview | None, column: str, row_id: str) -> bytes | None:
    """*value* sealed under *key_id* (None or empty: stored as it is)."""
    if key_id is None or not value:
        return value if value is None else bytes(value)
    return _cipher_for(key_id, row_id, column).encrypt(bytes(value), aad=context(column, row_id), key_id=key_id)


def open_value(key_id: str | None, value: bytes | memoryview | None, column: str, row_id: str) -> bytes | None:
    """The plaintext of a stored value; ``KeyUnavailable`` when it cannot be opened here."""
    if key_id is None or not value:
        return value if value is None else bytes(value)
    data = bytes(value)
    try:
        sealed_under = key_id_of(data)
        return _cipher_for(sealed_under, row_id, column).decrypt(data, aad=context(column, row_id))
    except KeyUnavailable:
        raise
    except EncryptionError as exc:
        raise KeyUnavailable(f"{_what(column, row_id)} cannot be opened: {exc}", key_id=key_id) from None


class ServerText(str):
    """An error text of the server's own making, with no data of the task's
    (why its payload could not be opened here): stored as it is, so that it
    can be written on a row whose key this node does not hold."""


def seal_text(key_id: str | None, text: str, column: str, row_id: str) -> str:
    if key_id is None or not text or isinstance(text, ServerText):
        return text
    sealed = seal(key_id, text.encode(), column, row_id)
    return TEXT_PREFIX + base64.b64encode(sealed or b"").decode()


def open_text(key_id: str | None, text: str, column: str, row_id: str) -> str:
    if key_id is None or not text or not text.startswith(TEXT_PREFIX):
        return text
    try:
        data = base64.b64decode(text[len(TEXT_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise KeyUnavailable(f"{_what(column, row_id)} is not a sealed value", key_id=key_id) from None
    return (open_value(key_id, data, column, row_id) or b"").decode("utf-8", "replace")


# -- whole rows ------------------------------------------------------------------------


def seal_task_values(values: dict[str, Any]) -> dict[str, Any]:
    """A task row's values by attribute name (as an INSERT's parameters) with
    its sealed columns sealed under its ``key_id``; a new dict."""
    key_id = values.get("key_id")
    if key_id is None:
        return values
    row_id = values["id"]
    out = dict(values)
    for name in ("payload", "result"):
        if out.get(name):
            out[name] = seal(key_id, out[name], TASK_COLUMNS[name], row_id)
    if out.get("last_error"):
        out["last_error"] = seal_text(key_id, out["last_error"], TASK_COLUMNS["last_error"], row_id)
    return out


def open_task(task: Any, loaded: Any = None) -> None:
    """Open the sealed columns of a task (a model instance, a ``LeasedTask``)
    in place. *loaded*: the attribute names it holds (default: all three).

    One that cannot be opened here is not handed on: the task's
    ``seal_error`` says why, and its payload and result read empty.
    """
    key_id = task.key_id
    if key_id is None:
        return
    names = TASK_COLUMNS if loaded is None else [n for n in TASK_COLUMNS if n in loaded]
    try:
        for name in names:
            value = getattr(task, name)
            if name == "last_error":
                task.last_error = open_text(key_id, value, TASK_COLUMNS[name], task.id)
            elif value:
                setattr(task, name, open_value(key_id, value, TASK_COLUMNS[name], task.id))
    except KeyUnavailable as exc:
        task.seal_error = exc.message
        for name in names:
            setattr(task, name, {"payload": b"", "result": None, "last_error": ""}[name])


def open_attempt(attempt: Any) -> None:
    """Open an attempt's error text in place; one that cannot be opened here
    reads empty, its ``seal_error`` saying why."""
    try:
        attempt.error = open_text(attempt.key_id, attempt.error, ATTEMPT_ERROR, attempt.task_id)
    except KeyUnavailable as exc:
        attempt.seal_error, attempt.error = exc.message, ""


def end_to_end_key_id(payload: bytes | None, metadata: dict[str, str] | None) -> str | None:
    """The key id of a payload its producer sealed end to end (the SDK's
    ``encryptor``), or None: the server holds no key for it."""
    if not payload or not is_marked(metadata):
        return None
    try:
        return key_id_of(bytes(payload))
    except EncryptionError:
        return None


def encryption_of(row: Any) -> dict[str, str | None]:
    """What the API and the dashboard say of a row's encryption: the key it is
    sealed under at rest, the key its producer sealed the payload under end to
    end, and why a sealed value could not be opened here."""
    return {
        "at_rest": row.key_id,
        "end_to_end": end_to_end_key_id(row.payload, getattr(row, "metadata", None)),
        "error": row.seal_error or None,
    }
