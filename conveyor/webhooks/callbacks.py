"""WebhookService: the callbacks of asynchronous webhook deliveries.

Authenticated by the delivery's lease token alone (no API token). Any node
may receive them: the outcome is written through the broker here, then the
node holding the delivery is told to free its slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.broker import get_broker
from conveyor.exceptions import InvalidArgument
from conveyor.webhooks import tokens

OUTCOMES = {
    "TASK_OUTCOME_SUCCESS": "success",
    "TASK_OUTCOME_RETRY": "retry",
    "TASK_OUTCOME_SKIP_RETRY": "skip_retry",
}


def heartbeat(data: dict[str, Any]) -> dict[str, Any]:
    """Extend the delivery's lease (now + lease TTL)."""
    task_id, lease_id = tokens.open_token(data.get("leaseToken"))
    expires = get_broker().extend(task_id, lease_id)
    return {"leaseExpiresAt": expires.isoformat().replace("+00:00", "Z")}


def report_result(data: dict[str, Any]) -> dict[str, Any]:
    """Finish the delivery: success, retry (with backoff) or skip retry."""
    task_id, lease_id = tokens.open_token(data.get("leaseToken"))
    outcome = OUTCOMES.get(str(data.get("outcome", "")).upper())
    if outcome is None:
        raise InvalidArgument("outcome", f"must be one of {', '.join(OUTCOMES)}")
    error = data.get("errorMsg") or data.get("error_msg") or ""
    if not isinstance(error, str):
        raise InvalidArgument("errorMsg", "must be a string")
    broker = get_broker()
    if outcome == "success":
        task = broker.ack(task_id, lease_id)
    else:
        task = broker.settle_failure(task_id, lease_id, error or "reported failure", skip_retry=outcome == "skip_retry")
    free_slot(task_id)
    return {"state": "TASK_STATE_" + str(task.state).upper()}


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


WEBHOOK_SERVICE: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "Heartbeat": heartbeat,
    "ReportResult": report_result,
}
