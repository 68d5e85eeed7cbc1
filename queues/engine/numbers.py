"""Numbers given as input: the one check that a number is finite.

``math.isfinite`` converts an int to a float first, and raises OverflowError past 1.8e308 (an
int of 309 digits or more, which a JSON body or a form may carry): that was a 500, not a 400.
"""

import math
import sys


def is_finite(value):
    """True for an int or float that is neither infinite, NaN, nor an int too large for a float."""
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max  # compared exactly, never converted
    return math.isfinite(value)
