"""Deploy markers: ``mark_deploy(client, label)`` notes a deploy at Redis's time; the dashboard's
charts draw a vertical line with its label at that time from then on.

Kept in the global zset ``keys.DEPLOYS`` (score: when, ms; member: JSON ``{"label", "at"}``),
the last ``DEPLOYS_MAX``; read and written from Python only.
"""

import json

from . import keys, readmodel
from .errors import InvalidInput

#: Deploys remembered (the oldest go first) and the longest label.
DEPLOYS_MAX = 500
LABEL_MAX = 100


def check_label(label):
    """``label`` stripped, if it is 1 to LABEL_MAX characters of one line; else InvalidInput."""
    if not isinstance(label, str) or not label.strip() or len(label.strip()) > LABEL_MAX or "\n" in label:
        raise InvalidInput(f"a deploy's label must be one line of 1 to {LABEL_MAX} characters, not {label!r}")
    return label.strip()


def mark_deploy(client, label):
    """Note a deploy now (Redis's clock); returns its time (ms)."""
    label = check_label(label)
    now = readmodel.server_ms(client)
    p = client.pipeline(transaction=False)
    p.zadd(keys.DEPLOYS, {json.dumps({"label": label, "at": now}): now})
    p.zremrangebyrank(keys.DEPLOYS, 0, -DEPLOYS_MAX - 1)
    p.execute()
    return now
