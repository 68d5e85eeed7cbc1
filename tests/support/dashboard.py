"""The dashboard's test helpers: staff users and their session cookies, websockets to a live
server, many queues made as enqueues make them, tasks failed for good, and Redis's command count."""

import socket

from django.contrib.auth.models import Permission, User
from django.test import Client
from websockets.sync.client import connect

from queues import Queue
from queues.engine import commands, keys
from queues.models import ACTION_PERMISSIONS

ACTIONS = [name for name in ACTION_PERMISSIONS if name not in ("view_dashboard", "enqueue_task")]


def make_user(username, staff=True, perms=()):
    user = User.objects.create_user(username, password="pw", is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="queues", codename__in=perms))
    return user


def perm(codename):
    return Permission.objects.get(content_type__app_label="queues", codename=codename)


def staff(username, *, group=None):
    """A staff user who may view the dashboard (directly, or through ``group``)."""
    user = User.objects.create_user(username, password="pw-" + username, is_staff=True)
    if group is None:
        user.user_permissions.add(perm("view_dashboard"))
    else:
        user.groups.add(group)
    return user


def forced_cookie(user):
    web = Client()
    web.force_login(user)
    return f"sessionid={web.cookies['sessionid'].value}"


def open_socket(server, path, cookie, origin="same", host=None):
    """A websocket to the server, sent as a page of ``origin`` would send it."""
    origin = server.url if origin == "same" else origin
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    ws = connect(
        f"ws://{host or f'127.0.0.1:{server.port}'}{path}",
        sock=sock,
        origin=origin,
        additional_headers={"Cookie": cookie},
        open_timeout=15,
    )
    ws.recv(timeout=15)  # the first snapshot: the socket is live
    return ws


def make_queue_names(client, n):
    """``n`` queues of 200-character names, one task each, made as an enqueue makes them."""
    names = [f"{i:06d}".ljust(200, "n") for i in range(n)]
    for start in range(0, n, 500):
        chunk = names[start : start + 500]
        calls = [commands.enqueue(q, [(f"{q}-{0:016x}", b"x", "", "")]) for q in chunk]
        commands.run_pipelined(client, calls)
        client.sadd(keys.KNOWN_QUEUES, *chunk)
    return names


def queues_of_one_task(client, n):
    """``n`` queues of one pending task each (as many enqueues would make them); their names."""
    names = [f"s{i:05d}" for i in range(n)]
    for start in range(0, n, 1000):
        chunk = names[start : start + 1000]
        commands.run_pipelined(client, [commands.enqueue(q, [(f"{q}-{0:016x}", b"payload", "", "")]) for q in chunk])
        client.sadd(keys.KNOWN_QUEUES, *chunk)
    return names


def commands_processed(client):
    return int(client.info("stats")["total_commands_processed"])


def failed_tasks(client, queue, n, tags=None):
    """``n`` tasks of ``queue`` failed for good (through the scripts); their ids."""
    ids = Queue(queue).enqueue_many([f"f{i}" for i in range(n)], retries=0, tags=tags)
    commands.register(queue, "wf", ttl=60, lock_ttl=60, grace=1, default_timeout=0, fresh=True).run(client)
    started = commands.start(queue, "wf", n, lock_ttl=60, grace=1, default_timeout=0, result_ttl=60).run(client)
    for t in started.tasks:
        commands.fail(
            queue, "wf", t.id, t.lease, "E", "", retries=0, backoff=0, backoff_max=0, jitter=0, history=5
        ).run(client)
    return ids
