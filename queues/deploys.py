"""``queues.mark_deploy(label)``: mark a deploy now; the dashboard's charts draw a line with its
label from then on (``python manage.py mark_deploy "<label>"`` does the same)."""

from .conf import get_connection
from .engine import deploys


def mark_deploy(label):
    """Mark a deploy now (Redis's clock); returns its time (ms). InvalidInput for a bad label."""
    return deploys.mark_deploy(get_connection().client, label)
