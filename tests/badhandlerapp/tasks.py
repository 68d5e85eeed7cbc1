"""A handler with a bad limit: importing this module raises ConfigurationError."""

from queues import handler


@handler("emails", concurrency=0)
def send(task):
    return None
