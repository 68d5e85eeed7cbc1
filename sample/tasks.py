"""Sample handlers for ``make demo``: quick, slow, flaky and async tasks."""

import asyncio
import random
import time

from queues import handler


@handler("default")
def quick(task):
    time.sleep(random.uniform(0.05, 0.3))


@handler("emails", retries=3, backoff=2)
def send_email(task):
    """Fails now and then, to show retries and the failure history."""
    time.sleep(random.uniform(0.1, 0.5))
    if random.random() < 0.2:
        raise ConnectionError(f"SMTP server refused the message for {task.payload}")


@handler("reports", timeout=120, lock=lambda task: task.payload.split(":")[0])
def build_report(task):
    """Slow; reports for the same customer never run at once."""
    for _ in range(50):
        if task.cancelled:
            return
        time.sleep(0.2)


@handler("notifications")
async def notify(task):
    await asyncio.sleep(random.uniform(0.05, 0.2))
