"""The broker's concerns: the names callers use, who uses whom, no reach through ``self``."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

from conveyor.broker import Broker, Concerns
from conveyor.broker.base import Context

# Every public name of the broker before it was split by concern (issue 20):
# callers in conveyor/, tests/ and bench/ use these, and must not change.
# fmt: off
PUBLIC_NAMES = (
    "ack", "ack_many", "ack_on", "after_commit", "announce_inserted", "archive_expired", "archive_leased",
    "archive_task", "archive_tasks", "as_model", "atomic", "bulk", "bulk_job", "bulk_jobs", "cancel_task",
    "cancel_tasks", "clock", "concurrency_limit", "concurrency_limits", "count_matching", "cron", "db",
    "dead_nodes", "defer_suspects", "delete_concurrency_limit", "delete_cron_entry", "delete_group_config",
    "delete_rate_limit", "delete_task", "delete_tasks", "delete_webhook", "due_groups", "edges", "emit", "enqueue",
    "enqueue_batch", "enqueue_one", "enqueue_tx", "extend", "extend_many", "fail", "filtered", "fire_cron_entry",
    "get_cron_entry", "get_task", "get_webhook", "group_config", "group_configs", "group_configs_table",
    "group_stats", "hand_over", "hooks", "info", "insert_on", "key_status", "key_usage", "lease", "lease_group",
    "lease_on", "list_cron_entries", "list_due_cron_entries", "list_tasks", "list_webhooks", "now", "offer_misses",
    "one_insert_task", "pending_counts", "promote_ready_dependents", "promote_scheduled", "purge", "queue_paused",
    "queue_policy", "queue_stats", "queues", "rate_limit", "rate_limits", "reap_expired_leases", "release",
    "release_many", "reschedule_task", "reschedule_tasks", "rescue_node", "reseal_cron", "reseal_step",
    "resolve_after_commit", "resolve_dependents", "run_bulk_batch", "run_task", "run_tasks", "running_bulk_ids",
    "set_concurrency_limit", "set_cron_paused", "set_group_config", "set_progress", "set_queue_paused",
    "set_queue_policy", "set_rate_limit", "set_webhook_paused", "settle_crash", "settle_failure", "start_bulk",
    "store", "task_attempts", "tasks", "update_cron_next_run", "upsert_cron_entry", "upsert_webhook",
    "wake_after_commit", "webhooks",
)
# fmt: on


def test_the_broker_keeps_every_public_name_it_had():
    broker = Broker()
    missing = [name for name in PUBLIC_NAMES if not hasattr(broker, name)]
    assert missing == []


def test_each_operation_is_a_concerns_own_bound_method_with_nothing_between():
    broker = Broker()
    owners = [getattr(broker.concerns, f) for f in Concerns.__dataclass_fields__]
    for name, value in vars(broker).items():
        if name in ("ctx", "concerns"):
            continue
        owner = value.__self__
        assert owner in owners or owner is broker.ctx, name
        assert value.__func__ is getattr(type(owner), value.__name__), name


def test_the_concerns_use_one_another_without_a_cycle():
    uses = {cls: _collaborators(cls) for cls in _concern_classes()}
    assert all(used <= set(uses) for used in uses.values()), uses
    done: set[type] = set()

    def visit(cls: type, path: tuple[type, ...]) -> None:
        assert cls not in path, [c.__name__ for c in (*path, cls)]
        if cls not in done:
            for used in uses[cls]:
                visit(used, (*path, cls))
            done.add(cls)

    for cls in uses:
        visit(cls, ())


def test_a_concern_reaches_only_its_own_members_its_context_and_its_collaborators():
    for cls in _concern_classes():
        tree = ast.parse(Path(inspect.getfile(cls)).read_text())
        (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
        own = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        own |= {t.attr for t in ast.walk(init) if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store)}
        reached = {
            n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and getattr(n.value, "id", None) == "self"
        }
        assert reached <= own, (cls.__name__, sorted(reached - own))


def _concern_classes() -> list[type]:
    hints = typing.get_type_hints(Concerns)
    return [hints[f] for f in Concerns.__dataclass_fields__]


def _collaborators(cls: type) -> set[type]:
    """The concerns *cls* is built with (its constructor's parameters after the context)."""
    hints = typing.get_type_hints(cls.__init__)
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert hints[params[0]] is Context, cls
    return {hints[p] for p in params[1:]}
