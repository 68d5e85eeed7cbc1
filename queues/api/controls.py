"""The HTTP API's bodies for the task controls (``engine.controls``): a ``{"key", "seconds"}``
window (``throttle``, ``debounce``) and fields that can't be given together, in JSON Schema too."""

from ..engine.controls import LONGEST
from ..engine.keys import LOCK_KEY_MAX
from .errors import BadRequest


def window(name, value):
    """``value`` if it is an object of exactly ``key`` and ``seconds``, else BadRequest naming ``name``."""
    if not isinstance(value, dict) or set(value) != {"key", "seconds"}:
        raise BadRequest(f'{name}: must be an object {{"key", "seconds"}}', name)
    return value


def window_schema():
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["key", "seconds"],
        "properties": {
            "key": {"type": "string", "minLength": 1, "maxLength": LOCK_KEY_MAX},
            "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": LONGEST},
        },
    }


def not_both(a, b):
    """The JSON Schema saying fields ``a`` and ``b`` are not both given (``null`` is "not given")."""
    given = {"not": {"type": "null"}}
    return {"not": {"required": [a, b], "properties": {a: given, b: given}}}
