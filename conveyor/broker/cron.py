"""Cron entries: stored schedules the scheduler turns into tasks."""

from __future__ import annotations

from dataclasses import fields as dc_fields
from datetime import datetime
from typing import Any

from conveyor.broker.base import Context
from conveyor.broker.enqueue import Enqueuer
from conveyor.broker.types import CronSpec, TaskSpec
from conveyor.broker.validation import UNSTORABLE, check_queue_name, check_task_id, check_text, task_fields
from conveyor.cron import check_spec, check_timezone, next_fire
from conveyor.exceptions import DuplicateTask, InvalidArgument, KeyUnavailable, NotFound
from conveyor.models import CronEntry, Task
from conveyor.sealing import CRON_PAYLOAD, active_key_id, seal

# Task options a cron entry may carry (everything but what each fire decides).
CRON_OPTIONS = (
    "priority",
    "max_retry",
    "timeout",
    "retention",
    "expires_in",
    "metadata",
    "unique_ttl",
    "concurrency_key",
    "group",
)


class Cron:
    """Cron entries: stored schedules, and firing one as a task."""

    def __init__(self, ctx: Context, enqueuer: Enqueuer) -> None:
        self.ctx = ctx
        self.enqueuer = enqueuer  # a fire enqueues like any caller

    @property
    def cron(self) -> Any:
        return CronEntry.objects.db_manager(self.ctx.db)

    def upsert_cron_entry(self, spec: CronSpec) -> CronEntry:
        """Create or replace an entry; its next run restarts from now."""
        now = self.ctx.now()
        check_task_id(spec.id, "id")
        schedule = check_spec(spec.spec)
        check_timezone(spec.timezone)
        options = _check_options(spec.options)
        task_fields(
            task_spec_for(spec.task_type, spec.queue, spec.payload, spec.content_type, options, {}, spec.id), now
        )
        payload, key_id = bytes(spec.payload or b""), active_key_id()
        values = {
            "spec": schedule,
            "timezone": spec.timezone or "UTC",
            "task_type": spec.task_type,
            "queue": spec.queue,
            # Sealed under the active key if the node has a keyring (every run
            # is opened and sealed again as a task row of its own).
            "payload": seal(key_id, payload, CRON_PAYLOAD, spec.id),
            "key_id": key_id,
            "content_type": spec.content_type or "application/json",
            "options": options,
            "paused": bool(spec.paused),
            "next_run_at": next_fire(schedule, spec.timezone, now),
            "updated_at": now,
        }
        entry, _created = self.cron.update_or_create(
            id=spec.id, defaults=values, create_defaults={**values, "created_at": now}
        )
        entry.payload = payload
        return entry

    def get_cron_entry(self, entry_id: str) -> CronEntry:
        # An id no database can store names no entry (PostgreSQL refuses NUL in a query).
        entry = None if UNSTORABLE.search(entry_id) else self.cron.filter(id=entry_id).first()
        if entry is None:
            raise NotFound(f"cron entry {entry_id} not found", id=entry_id)
        return entry

    def list_cron_entries(self) -> list[CronEntry]:
        return list(self.cron.order_by("id"))

    def list_due_cron_entries(self) -> list[CronEntry]:
        return list(self.cron.filter(paused=False, next_run_at__lte=self.ctx.now()).order_by("next_run_at", "id"))

    def set_cron_paused(self, entry_id: str, paused: bool) -> CronEntry:
        now = self.ctx.now()
        with self.ctx.atomic():
            entry = self.get_cron_entry(entry_id)
            entry.paused = bool(paused)
            if not paused:
                # Resuming does not replay slots missed while paused.
                entry.next_run_at = next_fire(entry.spec, entry.timezone, now)
            entry.updated_at = now
            entry.save(update_fields=["paused", "next_run_at", "updated_at"])
        return entry

    def update_cron_next_run(self, entry_id: str, expected: datetime, next_run: datetime) -> bool:
        """Compare-and-set: move next run only if it still equals *expected*."""
        return bool(
            self.cron.filter(id=entry_id, next_run_at=expected).update(next_run_at=next_run, last_run_at=expected)
        )

    def delete_cron_entry(self, entry_id: str) -> None:
        if not UNSTORABLE.search(entry_id):
            self.cron.filter(id=entry_id).delete()

    def fire_cron_entry(self, entry: CronEntry) -> Task | None:
        """Enqueue the entry's task for its due slot, once.

        The compare-and-set on next run and the enqueue commit together, so
        two schedulers racing for one slot produce one task; the next run is
        computed from now, so slots missed during downtime fire once. An
        entry paused since *entry* was read does not fire. With the
        ``unique_ttl`` option, a slot whose previous run still holds the
        entry's unique key is skipped (the next run still moves on).
        """
        if entry.seal_error:
            # Its payload cannot be opened here: no run with an empty one.
            raise KeyUnavailable(entry.seal_error, key_id=entry.key_id)
        now = self.ctx.now()
        slot = entry.next_run_at
        following = next_fire(entry.spec, entry.timezone, max(now, slot))
        marks = {"conveyor.cron": entry.id, "conveyor.slot": slot.isoformat().replace("+00:00", "Z")}
        spec = task_spec_for(
            entry.task_type, entry.queue, entry.payload, entry.content_type, entry.options, marks, entry.id
        )
        with self.ctx.atomic():
            claimed = self.cron.filter(id=entry.id, next_run_at=slot, paused=False).update(
                next_run_at=following, last_run_at=slot
            )
            if not claimed:
                return None
            try:
                return self.enqueuer.enqueue(spec)
            except DuplicateTask:
                return None


def _check_options(options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise InvalidArgument("options", "must be an object")
    unknown = sorted(set(options) - set(CRON_OPTIONS))
    if unknown:
        raise InvalidArgument(
            f"options.{unknown[0]}", f"is not a cron task option (allowed: {', '.join(CRON_OPTIONS)})"
        )
    if "metadata" in options and not isinstance(options["metadata"], dict):
        raise InvalidArgument("options.metadata", "must be an object of string to string")
    return dict(options)


def task_spec_for(
    task_type: str,
    queue: str,
    payload: bytes,
    content_type: str,
    options: dict[str, Any],
    marks: dict[str, str],
    entry_id: str = "",
) -> TaskSpec:
    check_text(task_type, "task_type", 200, required=True)
    check_queue_name(queue)
    known = {f.name for f in dc_fields(TaskSpec)}
    opts = {k: v for k, v in options.items() if k in known}
    if opts.get("unique_ttl") is not None:
        # One live run per entry: the key is the entry's, held for the TTL.
        opts["unique_key"] = f"cron:{entry_id}"
    metadata = {**(opts.pop("metadata", None) or {}), **marks}
    return TaskSpec(
        type=task_type,
        queue=queue,
        payload=bytes(payload or b""),
        content_type=content_type or "application/json",
        metadata=metadata,
        **opts,
    )
