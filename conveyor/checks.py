"""System checks: catch a bad CONVEYOR setting at ``manage.py check`` time."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register


@register()
def check_conveyor_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    from conveyor.backoff import POLICIES
    from conveyor.conf import conveyor_settings

    conveyor_settings.reload()
    try:
        policy = conveyor_settings.RETRY_POLICY
        ttl = conveyor_settings.LEASE_TTL
        batch = conveyor_settings.LEASE_BATCH_MAX
    except (ValueError, TypeError) as exc:
        return [Error(f"invalid CONVEYOR setting: {exc}", id="conveyor.E001")]
    errors = []
    if policy not in POLICIES:
        errors.append(Error(f"CONVEYOR RETRY_POLICY must be one of {', '.join(POLICIES)}", id="conveyor.E002"))
    if ttl <= 0:
        errors.append(Error("CONVEYOR LEASE_TTL must be positive", id="conveyor.E003"))
    if batch < 1:
        errors.append(Error("CONVEYOR LEASE_BATCH_MAX must be at least 1", id="conveyor.E004"))
    return errors
