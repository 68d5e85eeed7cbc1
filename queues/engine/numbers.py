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


def is_finite(value):
    """True for an int or float that is neither infinite, NaN, nor an int too large for a float."""
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max  # compared exactly, never converted
    return math.isfinite(value)
