"""Conveyor's Python SDK: producers (``Client``) and workers (``Worker``).

Imports nothing from Django: install ``urllib3`` and ``websockets`` and use
it from any Python program.
"""

from conveyor.sdk.client import AsyncClient, BatchItem, Client, TaskInfo, task_request
from conveyor.sdk.encryption import AESGCM, EncryptionError, Encryptor, Key
from conveyor.sdk.errors import (
    APIError,
    ConnectError,
    ConveyorError,
    Duplicate,
    Fail,
    NotFound,
    PermissionDenied,
    Release,
    SkipRetry,
    TransportError,
    Unauthenticated,
    WorkerRefused,
)
from conveyor.sdk.task import Task
from conveyor.sdk.worker import AsyncWorker, Worker

__all__ = [
    "AESGCM",
    "APIError",
    "AsyncClient",
    "AsyncWorker",
    "BatchItem",
    "Client",
    "ConnectError",
    "ConveyorError",
    "Duplicate",
    "EncryptionError",
    "Encryptor",
    "Fail",
    "Key",
    "NotFound",
    "PermissionDenied",
    "Release",
    "SkipRetry",
    "Task",
    "TaskInfo",
    "TransportError",
    "Unauthenticated",
    "Worker",
    "WorkerRefused",
    "task_request",
]
