"""When schedules tick (the pure function, no Redis) and how their settings are checked."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from queues.engine.errors import InvalidSchedule
from queues.engine.schedule_settings import check_all, parse
from queues.engine.ticks import Timing, next_after


def ms(text, tz):
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def local(ms_value, tz):
    return datetime.fromtimestamp(ms_value / 1000, ZoneInfo(tz)).isoformat()


def ticks_from(timing, start_ms, n):
    out, at = [], start_ms
    for _ in range(n):
        at = next_after(timing, at)
        out.append(local(at, timing.timezone))
    return out


@pytest.mark.parametrize(
    "tz, day, spring",
    [
        ("Europe/Paris", "2025-03-30", "2025-03-30T03:00:00+02:00"),
        ("America/New_York", "2025-03-09", "2025-03-09T03:00:00-04:00"),
    ],
)
def test_a_time_skipped_by_spring_forward_runs_once_at_the_next_valid_time(tz, day, spring):
    """02:30 does not exist on a spring-forward day: the run happens once, at 03:00, then on time."""
    timing = Timing(cron="30 2 * * *", timezone=tz)
    got = ticks_from(timing, ms(f"{day}T00:00", tz) - 86_400_000, 3)
    assert got[1] == spring
    assert got[0].endswith("T02:30:00" + got[0][-6:]) and got[2].endswith("T02:30:00" + got[2][-6:])
    assert len(set(got)) == 3


@pytest.mark.parametrize(
    "tz, day, cron, first, second",
    [
        ("Europe/Paris", "2025-10-26", "30 2 * * *", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"),
        ("America/New_York", "2025-11-02", "30 1 * * *", "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"),
    ],
)
def test_a_time_repeated_by_fall_back_runs_once(tz, day, cron, first, second):
    """01:30 (New York) or 02:30 (Paris) happens twice on a fall-back day: one run, the first."""
    timing = Timing(cron=cron, timezone=tz)
    assert ticks_from(timing, ms(f"{day}T00:00", tz), 2) == [first, second]
    # Asked from inside the repeated hour (after the first run), the next run is the next day's.
    inside = ms(f"{day}T{first[11:16]}", tz) + 3_600_000 + 60_000
    assert local(next_after(timing, inside), tz) == second


def test_hourly_jobs_follow_real_time_across_dst():
    """'0 * * * *' runs every real hour: twice at 01:00 on fall-back, 23 runs on spring-forward day."""
    tz = "America/New_York"
    fall = ticks_from(Timing(cron="@hourly", timezone=tz), ms("2025-11-02T00:30", tz), 3)
    assert fall == ["2025-11-02T01:00:00-04:00", "2025-11-02T01:00:00-05:00", "2025-11-02T02:00:00-05:00"]
    spring = ticks_from(Timing(cron="0 * * * *", timezone="Europe/Paris"), ms("2025-03-30T00:00", "Europe/Paris"), 24)
    assert sum(t.startswith("2025-03-30") for t in spring) == 22  # 01:00 .. 23:00 less the lost 02:00


def test_every_ticks_are_multiples_of_the_interval_since_the_epoch():
    """Every worker computes the same ticks: multiples of the interval, strictly after the time."""
    t = Timing(every=10)
    assert next_after(t, 1_700_000_000_000) == 1_700_000_010_000
    assert next_after(t, 1_700_000_003_500) == 1_700_000_010_000
    assert next_after(Timing(every=1.5), 2_999) == 3_000


def test_aliases_and_timezones():
    """@daily in a timezone is local midnight; UTC is the default."""
    assert ticks_from(Timing(cron="@daily", timezone="Europe/Paris"), ms("2025-06-01T12:00", "Europe/Paris"), 1) == [
        "2025-06-02T00:00:00+02:00"
    ]
    assert (
        local(next_after(Timing(cron="0 3 * * *"), ms("2025-06-01T12:00", "UTC")), "UTC") == "2025-06-02T03:00:00+00:00"
    )


@pytest.mark.parametrize(
    "raw, field, message",
    [
        ({"queue": "q", "cron": "61 * * * *"}, "cron", "invalid cron"),
        ({"queue": "q", "cron": "* * * *"}, "cron", "5 fields"),
        ({"queue": "q", "cron": "@fortnightly"}, "cron", "unknown shorthand"),
        ({"queue": "q", "cron": "0 0 30 2 *"}, "cron", "invalid cron"),
        ({"queue": "q", "cron": "0 3 * * *", "every": 10}, "cron", "exactly one"),
        ({"queue": "q"}, "every", "exactly one"),
        ({"queue": "q", "every": 0.5}, "every", "from 1"),
        ({"queue": "q", "every": "10"}, "every", "number of seconds"),
        ({"queue": "q", "every": True}, "every", "number of seconds"),
        ({"queue": "q", "every": 10, "timezone": "Mars/Olympus"}, "timezone", "unknown timezone"),
        ({"queue": "q", "every": 10, "timezone": "../etc/passwd"}, "timezone", "unknown timezone"),
        ({"queue": "q", "cron": "0," * 200_000 + "0 * * * *"}, "cron", "at most 1,000 characters, not 400,009"),
        ({"queue": "q", "every": 10, "timezone": "Europe/" + "x" * 100_000}, "timezone", "unknown timezone 'Europe/x"),
        ({"every": 10}, "queue", "required"),
        ({"queue": "bad queue", "every": 10}, "queue", "may only hold"),
        ({"queue": "q", "every": 10, "colour": "red"}, "colour", "unknown key"),
        ({"queue": "q", "every": 10, "missed": "all"}, "missed", "'skip' or 'once'"),
        ({"queue": "q", "every": 10, "overlap": "no"}, "overlap", "True or False"),
        ({"queue": "q", "every": 10, "enabled": 1}, "enabled", "True or False"),
        ({"queue": "q", "every": 10, "payload": b"raw"}, "payload", "must be text"),
        ({"queue": "q", "every": 10, "retries": -1}, "retries", ">= 0"),
        ({"queue": "q", "every": 10, "timeout": 0}, "timeout", "> 0"),
        ({"queue": "q", "every": 10, "backoff": "x"}, "backoff", "a number"),
        ({"queue": "q", "every": 10, "lock": ""}, "lock", "lock key"),
    ],
)
def test_bad_settings_name_the_schedule_and_the_key(raw, field, message):
    """Each bad entry raises InvalidSchedule naming the schedule and the key at fault."""
    with pytest.raises(InvalidSchedule) as info:
        parse("nightly", raw)
    assert info.value.schedule == "nightly" and info.value.field == field
    assert message in str(info.value) and "nightly" in str(info.value)
    assert len(str(info.value)) < 1500  # an error message stays short, whatever the input


def test_bad_names_and_shapes():
    """A bad name, a non-dict entry and a non-dict SCHEDULES are refused too; good entries pass."""
    specs, errors = check_all({"bad name": {"queue": "q", "every": 1}, "x": 5, "ok": {"queue": "q", "every": 1}})
    assert [s.name for s in specs] == ["ok"]
    assert [(e.schedule, e.field) for e in errors] == [("bad name", None), ("x", None)]
    assert check_all(["not", "a", "dict"])[1][0].field is None
