"""Sample handlers for ``make demo``: quick, slow (with progress and log lines), flaky and async
tasks, so that every page of the dashboard has something on it."""

import asyncio
import random
import time

from queues import handler


@handler("default")
def quick(task):
    time.sleep(random.uniform(0.05, 0.3))


@handler("emails", retries=3, backoff=2)
def send_email(task):
    """Fails now and then, to show retries and the failure history; an address at bounce.example
    fails every attempt, so it ends in the failed tasks after its 3 retries."""
    time.sleep(random.uniform(0.1, 0.5))
    if str(task.payload).endswith("@bounce.example"):
        raise ConnectionError(f"550 mailbox unavailable: {task.payload}")
    if random.random() < 0.2:
        raise ConnectionError(f"SMTP server refused the message for {task.payload}")


@handler("reports", timeout=120, lock=lambda task: task.payload.split(":")[0])
def build_report(task):
    """Slow (about 10 s), with progress and log lines; reports for the same customer never run at
    once."""
    pages = 50
    task.log(f"building report {task.payload}")
    for page in range(1, pages + 1):
        if task.cancelled:
            task.log("cancelled")
            return
        time.sleep(0.2)
        task.progress(page / pages, f"page {page} of {pages}")
        if page % 10 == 0:
            task.log(f"rendered {page} pages")
    task.log("report done")


@handler("notifications")
async def notify(task):
    await asyncio.sleep(random.uniform(0.05, 0.2))
