"""What one request may spend reading Redis: ``Budget`` counts the round trips a reader makes and
the time it takes, and says when to stop: out of round trips, out of time, or told to (the client
went away). Readers that may look at a lot (a search) check it between round trips and say, in
what they return, where and why they stopped, so that the user can go on from there."""

import threading
import time

#: Why a reader stopped early (``Budget.spent``).
ROUND_TRIPS, TIME, GONE = "round trips", "time", "client gone"


class Budget:
    def __init__(self, round_trips, seconds, stop=None):
        self.round_trips, self.seconds = round_trips, seconds
        self.stop = stop or threading.Event()
        self.used = 0
        self.started = time.monotonic()

    def spend(self, round_trips=1):
        self.used += round_trips

    @property
    def elapsed(self):
        return time.monotonic() - self.started

    def spent(self):
        """Why no more may be read (``GONE``, ``ROUND_TRIPS``, ``TIME``), or None while some may."""
        if self.stop.is_set():
            return GONE
        if self.used >= self.round_trips:
            return ROUND_TRIPS
        if self.elapsed >= self.seconds:
            return TIME
        return None
