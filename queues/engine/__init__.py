"""worqr's engine: plain Python and Lua on Redis, with no Django import anywhere below here."""

from . import _redis_import  # noqa: F401  (first: it imports redis-py lighter; see there)

# isort: split
from .batches import Batch, BatchNotFound
from .config import Config
from .connection import Connection, configure, get_default
from .errors import (
    ChunkFailed,
    ConfigurationError,
    InvalidCheckpoint,
    InvalidInput,
    InvalidQueueName,
    InvalidState,
    InvalidTask,
    NoHandler,
    NotReplicated,
    PayloadTooLarge,
    RateLimited,
    RedisUnavailable,
    RetryLater,
    StaleLease,
    TaskNotFound,
    TooManyQueues,
    WorkerCrashed,
    WorkerLost,
    WorqrError,
)
from .queue import Queue
from .registry import handler
from .task import Task
from .workflows import chain

__all__ = [
    "Config",
    "Connection",
    "configure",
    "get_default",
    "Queue",
    "Task",
    "Batch",
    "BatchNotFound",
    "chain",
    "handler",
    "WorqrError",
    "ConfigurationError",
    "InvalidInput",
    "InvalidQueueName",
    "InvalidTask",
    "PayloadTooLarge",
    "InvalidCheckpoint",
    "TaskNotFound",
    "InvalidState",
    "StaleLease",
    "WorkerLost",
    "NoHandler",
    "NotReplicated",
    "RedisUnavailable",
    "RateLimited",
    "RetryLater",
    "ChunkFailed",
    "TooManyQueues",
    "WorkerCrashed",
]
