"""Django admin: raw inspection, read-mostly.

Nothing here edits task state directly: the task actions call the broker,
like the API and the dashboard do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest

from conveyor.broker import get_broker
from conveyor.conf import conveyor_settings
from conveyor.models import (
    CronEntry,
    GroupConfig,
    Node,
    Queue,
    Task,
    TaskDependency,
    WebhookRegistration,
    WorkerSession,
)
from conveyor.permissions import missing_permission


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: no add, no change, no delete from the admin forms."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def broker_action(name: str, label: str) -> Callable[..., None]:
    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        ids = list(queryset.values_list("id", flat=True)[:1000])
        results = getattr(get_broker(), f"{name}_tasks")(ids)
        ok = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        if ok:
            modeladmin.message_user(request, f"{label}: {len(ok)} task(s).", messages.SUCCESS)
        for r in failed[:10]:
            modeladmin.message_user(request, f"{r.id}: {r.error.message}", messages.ERROR)  # type: ignore[union-attr]

    action.__name__ = f"{name}_selected"
    # As on the dashboard: deleting needs delete_task, the other actions change_task.
    action.allowed_permissions = ("remove_task",) if name == "delete" else ("act_on_task",)  # type: ignore[attr-defined]
    action.short_description = f"{label} selected tasks"  # type: ignore[attr-defined]
    return action


class DependencyInline(admin.TabularInline):
    model = TaskDependency
    fields = ("depends_on_id", "on_failure", "resolution")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "queue",
        "type",
        "state",
        "priority",
        "retried",
        "max_retry",
        "enqueued_at",
        "due_at",
        "last_error",
    )
    list_filter = ("state", "queue", "type")
    search_fields = ("=id", "type", "=unique_key", "=concurrency_key")
    ordering = ("-id",)
    list_per_page = 50
    show_full_result_count = False
    inlines = [DependencyInline]
    actions = [
        broker_action("run", "Run now"),
        broker_action("cancel", "Cancel"),
        broker_action("archive", "Archive"),
        broker_action("delete", "Delete"),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Task._meta.fields]

    # The forms stay read-only (has_change_permission is False); the broker
    # actions ask the user's own task permissions (conveyor.permissions).
    def has_act_on_task_permission(self, request: HttpRequest) -> bool:
        return missing_permission(request.user, "change", "task") is None

    def has_remove_task_permission(self, request: HttpRequest) -> bool:
        return missing_permission(request.user, "delete", "task") is None

    def get_actions(
        self, request: HttpRequest, action_location: ActionLocation = ActionLocation.CHANGE_LIST
    ) -> dict[str, Any]:
        # The broker's "delete_selected" replaces the admin's own by name (it
        # deletes through the broker); popping that name removed the broker's.
        actions = super().get_actions(request, action_location)
        if conveyor_settings.READ_ONLY:
            return {}
        return actions


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdmin):
    list_display = ("name", "paused", "policy", "rate", "burst", "concurrency_limit", "updated_at")
    list_filter = ("paused", "policy")
    search_fields = ("name",)


@admin.register(GroupConfig)
class GroupConfigAdmin(ReadOnlyAdmin):
    list_display = ("queue", "group", "max_size", "max_delay", "grace")
    search_fields = ("queue", "group")


@admin.register(CronEntry)
class CronEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "spec", "timezone", "task_type", "queue", "paused", "next_run_at", "last_run_at")
    list_filter = ("paused", "queue")
    search_fields = ("id", "task_type")


@admin.register(WebhookRegistration)
class WebhookRegistrationAdmin(ReadOnlyAdmin):
    list_display = ("name", "url", "concurrency", "paused", "updated_at")
    list_filter = ("paused",)
    search_fields = ("name", "url")
    exclude = ("secrets",)  # write-only


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = ("id", "host", "port", "pid", "version", "started_at", "seen_at", "leader_of")


@admin.register(WorkerSession)
class WorkerSessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "node", "concurrency", "inflight", "sdk_version", "remote", "connected_at")
    list_filter = ("node",)


# -- read-only mode beyond Conveyor's own models ------------------------------------------


class HonoursReadOnly:
    """ModelAdmin mixin: in read-only mode nothing is added, changed or deleted (views stay)."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return not conveyor_settings.READ_ONLY and super().has_add_permission(request, *args)  # type: ignore[misc]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not conveyor_settings.READ_ONLY and super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not conveyor_settings.READ_ONLY and super().has_delete_permission(request, obj)  # type: ignore[misc]


def honour_read_only(model: Any, site: admin.AdminSite = admin.site) -> None:
    """Register *model*'s admin again with ``HonoursReadOnly`` in front of it (public AdminSite API only)."""
    if not site.is_registered(model):
        return
    current = type(site.get_model_admin(model))
    if issubclass(current, HonoursReadOnly):
        return
    site.unregister(model)
    site.register(model, type(current.__name__, (HonoursReadOnly, current), {"__module__": current.__module__}))


# The admin's user management: a read-only node must not create users or
# hand out permissions. Admin modules load in INSTALLED_APPS order, so
# django.contrib.auth (listed before conveyor) has registered them by now.
honour_read_only(get_user_model())
honour_read_only(Group)
