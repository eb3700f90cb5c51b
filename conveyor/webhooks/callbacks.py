"""WebhookService: the callbacks of asynchronous webhook deliveries.

Authenticated by the delivery's lease token alone (no API token). Any node
may receive them: the outcome is written through the broker here, then the
node holding the delivery is told to free its slot.
"""

from __future__ import annotations

from datetime import datetime

from conveyor.broker import get_broker
from conveyor.exceptions import InvalidArgument
from conveyor.models import Task
from conveyor.webhooks import tokens

OUTCOMES = ("success", "retry", "skip_retry")
OUTCOME_NAMES = "TASK_OUTCOME_SUCCESS, TASK_OUTCOME_RETRY, TASK_OUTCOME_SKIP_RETRY"


def heartbeat(token: object) -> datetime:
    """Extend the delivery's lease (now + lease TTL); return its new expiry."""
    task_id, lease_id = tokens.open_token(token)
    return get_broker().extend(task_id, lease_id)


def report_result(token: object, outcome: str | None, error: str = "", result: bytes | None = None) -> Task:
    """Finish the delivery: success (with the handler's result), retry (with backoff) or skip retry."""
    task_id, lease_id = tokens.open_token(token)
    if outcome not in OUTCOMES:
        raise InvalidArgument("outcome", f"must be one of {OUTCOME_NAMES}")
    broker = get_broker()
    if outcome == "success":
        task = broker.ack(task_id, lease_id, result)
    else:
        task = broker.settle_failure(task_id, lease_id, error or "reported failure", skip_retry=outcome == "skip_retry")
    free_slot(task_id)
    return task


def free_slot(task_id: str) -> None:
    """Tell whichever node holds the delivery that it is settled."""
    from conveyor.dispatch.node import current_node

    node = current_node()
    if node is not None:
        node.call_soon(node.webhook_settled, task_id, True)
        return
    from conveyor.notify.groups import CONTROL_GROUP
    from conveyor.notify.layer import ChannelLayerHooks

    ChannelLayerHooks()._send(CONTROL_GROUP, {"type": "conveyor.webhook_settled", "task_id": task_id})
