"""Numbers given as input: the one check that a number is finite.

``math.isfinite`` converts an int to a float first, and raises OverflowError past 1.8e308 (an
int of 309 digits or more, which a JSON body or a form may carry): that was a 500, not a 400.
"""

import math
import sys

#: The longest wait or run time accepted, in seconds (a hundred years): a delay, a timeout, a
#: backoff, a RetryLater. Far past any real one, and well inside what a datetime holds: a delay
#: of 1e300 s was enqueued, then every page and read of its task raised.
MAX_SECONDS = 100 * 365 * 86400

#: The most retries a task may have (an enqueue's, a handler's, ``WORQR["RETRIES"]``): past 1,024
#: attempts a backoff of ``backoff * 2**(attempt - 1)`` is no finite number. A thousand retries at
#: the 1 h ``BACKOFF_MAX`` are six weeks of them.
MAX_RETRIES = 1000


def is_finite(value):
    """True for an int or float that is neither infinite, NaN, nor an int too large for a float."""
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max  # compared exactly, never converted
    return math.isfinite(value)


def shown(value):
    """``repr(value)`` for an error message; an int too long to print (Python refuses past 4,300
    digits, and its ValueError would stand for the message) is shown by its size."""
    try:
        return repr(value)
    except ValueError:
        return f"an integer of {value.bit_length():,} bits"
