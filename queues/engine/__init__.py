"""worqr's engine: plain Python and Lua on Redis, with no Django import anywhere below here."""

from .config import Config
from .connection import Connection, configure, get_default
from .errors import (
    ConfigurationError,
    InvalidInput,
    InvalidQueueName,
    InvalidState,
    InvalidTask,
    NoHandler,
    NotReplicated,
    PayloadTooLarge,
    RedisUnavailable,
    RetryLater,
    StaleLease,
    TaskNotFound,
    WorkerCrashed,
    WorkerLost,
    WorqrError,
)
from .queue import Queue
from .registry import handler
from .task import Task

__all__ = [
    "Config",
    "Connection",
    "configure",
    "get_default",
    "Queue",
    "Task",
    "handler",
    "WorqrError",
    "ConfigurationError",
    "InvalidInput",
    "InvalidQueueName",
    "InvalidTask",
    "PayloadTooLarge",
    "TaskNotFound",
    "InvalidState",
    "StaleLease",
    "WorkerLost",
    "NoHandler",
    "NotReplicated",
    "RedisUnavailable",
    "RetryLater",
    "WorkerCrashed",
]
