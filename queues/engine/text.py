"""Text a handler gives (its error and traceback, progress messages, log lines, a kept result) as
the bytes Redis keeps.

A Python string may hold surrogates, which UTF-8 cannot encode: U+DC80 to U+DCFF stand for the
undecodable bytes of ``surrogateescape`` (a file name read from disk, say), and any other lone
surrogate (``"\\ud800"``) is not text at all. Sent as it is, such a string made the Redis client
raise inside the worker (the task stayed active, or the worker exited). So:

- diagnostic text (``lossy``) keeps each such character as U+FFFD, so what Redis holds is always
  valid UTF-8;
- data (``exact``: a kept result) goes as a payload does (``surrogateescape``: escaped bytes
  back to the bytes they stand for), and a lone surrogate is refused with a ValueError saying
  where it is;
- what a producer gives (``payload``, and ``checked`` for an option's text: a lock, a tag, meta)
  is refused with InvalidTask naming it, before anything is written: the Redis client raised
  only as it sent it, after an enqueue with ``after=`` had linked its parents.
"""

import codecs

from .errors import InvalidTask

_ERRORS = "worqr.replace-surrogates"
_REPLACEMENT = "\ufffd".encode()


def _as_replacement(exc):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return _REPLACEMENT * (exc.end - exc.start), exc.end  # (UTF-8's encoder takes bytes, or ASCII text)


codecs.register_error(_ERRORS, _as_replacement)


def lossy(text):
    """``text`` as UTF-8, each surrogate as U+FFFD."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", _ERRORS)


def exact(text):
    """``text`` as a payload is encoded (UTF-8, ``surrogateescape``), or ValueError if it holds a
    surrogate that stands for no byte."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise ValueError(_why(text, exc)) from None


def _why(text, exc):
    return (
        f"it is not valid text: it holds an unpaired surrogate (U+{ord(text[exc.start]):04X}) at position {exc.start}"
    )


def payload(text):
    """A text payload's bytes (``exact``'s), or InvalidTask saying why not."""
    try:
        return exact(text)
    except ValueError as exc:
        raise InvalidTask(f"payload: {exc}") from None


def checked(name, text):
    """``text`` (an option's, named ``name``) if UTF-8 encodes it as it is, else InvalidTask."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidTask(f"{name}: {_why(text, exc)}") from None
    return text
