"""The HTTP API's errors: each is one status and a JSON body ``{"error": message, "field": name}``
(``field`` only when one input field is at fault)::

    ApiError
    ├── BadRequest            400  bad input; ``field`` names it
    ├── Unauthorized          401  no valid bearer token
    ├── Forbidden             403  the token lacks the permission
    ├── NotFound              404  unknown task, queue or route
    ├── MethodNotAllowed      405  (carries the allowed methods)
    ├── Conflict              409  the task's state changed under the request; or a new queue
    │                              refused (MAX_QUEUES queues exist)
    ├── RequestTooLarge       413  a body no valid request could have
    ├── UnsupportedMediaType  415  a body that is not JSON
    └── Unavailable           503  Redis cannot be reached (an enqueue's: with the ids ``added``,
                                   ``unknown`` (may have been added) and ``not_added``)

Engine errors are turned into these in one place, ``from_engine``.
"""

from ..engine.batches import BatchNotFound
from ..engine.errors import (
    InvalidInput,
    InvalidQueueName,
    InvalidState,
    PayloadTooLarge,
    RedisUnavailable,
    TaskNotFound,
    TooManyQueues,
)


class ApiError(Exception):
    status = 500

    def __init__(self, message, field=None):
        super().__init__(message)
        self.message, self.field = message, field

    #: More fields of the body (a gone task's ``outcome``, ``reason`` and ``parents``).
    extra = None

    def as_dict(self):
        out = {"error": self.message}
        if self.field:
            out["field"] = self.field
        if self.extra:
            out.update(self.extra)
        return out


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class MethodNotAllowed(ApiError):
    status = 405

    def __init__(self, method, allowed):
        super().__init__(f"method {method} is not allowed here; use {', '.join(allowed)}")
        self.allowed = allowed


class Conflict(ApiError):
    status = 409


class RequestTooLarge(ApiError):
    status = 413


class UnsupportedMediaType(ApiError):
    status = 415


class Unavailable(ApiError):
    status = 503


def from_engine(exc, field=None):
    """The ApiError for an engine error (``field``: the input it is about, if known)."""
    if isinstance(exc, InvalidQueueName):
        return BadRequest(f"queue: {exc}", "queue")
    if isinstance(exc, PayloadTooLarge):
        return BadRequest(f"payload: {exc}", "payload")
    if isinstance(exc, InvalidInput):
        return BadRequest(f"{field}: {exc}" if field else str(exc), field)
    if isinstance(exc, (TaskNotFound, BatchNotFound)):
        return NotFound(str(exc))
    if isinstance(exc, InvalidState):
        return Conflict(str(exc))
    if isinstance(exc, TooManyQueues):
        return Conflict(str(exc), "queue")
    if isinstance(exc, RedisUnavailable):  # enqueue's retries ran out: which tasks may be in
        err = Unavailable(str(exc))
        err.extra = {"added": exc.added, "unknown": exc.unknown, "not_added": exc.not_added}
        return err
    return None
