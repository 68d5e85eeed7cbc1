"""A reference model of one queue, in plain Python, for the randomized model check
(tests/test_model_check.py): what every script should do to the queue's state, written
independently of the Lua. Time never passes in it (no task becomes due, no lock or heartbeat
expires, no rate window opens): the check drives the scripts with long TTLs and windows.

A removed pending task's entry stays on front or pending, as in Redis (skipped when reached, and
counted by the wake-ups that look at the lists' lengths); an id pushed again after its task left
may then be listed twice, and runs from the first of its entries reached.

Limits: the queue's concurrency and rate (every start counts while a rate is set; the window
never passes), and per partition. A partitioned task is listed in its partition; the runnable
partitions are served round-robin from the ring. As in Redis, a removed task's entry stays on
its partition's list (skipped when reached), and the ring may hold stale entries.

Workflows (``after=``) are modelled within the queue: ``link`` records children, a task's end
with children (or a reason) goes to the outbox, and ``resolve`` tells children, releasing or
cancelling them (``blocked`` tasks).
"""

from collections import OrderedDict, deque

from queues.engine.codes import Code


class ModelError(AssertionError):
    pass


class Task:
    __slots__ = (
        "id",
        "state",
        "lock",
        "unique",
        "lease",
        "attempts",
        "retries",
        "worker",
        "cancel",
        "started",
        "part",
        "waitfor",
        "run_anyway",
        "delayed",
        "expires",
    )

    def __init__(self, task_id, lock, unique, retries, part=None):
        self.id, self.lock, self.unique, self.retries, self.part = task_id, lock, unique, retries, part
        self.state, self.lease, self.attempts, self.worker, self.cancel, self.started = None, 0, 0, None, False, None
        self.waitfor, self.run_anyway, self.delayed = set(), False, False
        self.expires = False  # enqueued with an expiry already past: it expires when reached


class QueueModel:
    def __init__(self):
        self.tasks = {}  # id -> Task (tasks still in Redis)
        self.front, self.pending = deque(), deque()
        self.waits = {}  # lock -> deque of ids
        self.holder = {}  # lock -> "id:lease" (the lock key exists)
        self.heads = {}  # lock -> id
        self.held = {}  # worker -> OrderedDict(holder -> lock, '' for none): what it keeps for handlers still running
        self.kept = {}  # holder -> partition (None: none): slots kept for handlers still running
        self.unique = {}  # key -> id
        self.remembered = set()  # ids enqueued with remember (the `seen` set; nothing expires in a run)
        self.workers, self.idle = set(), set()
        self.owned = {}  # worker -> set of ids
        self.paused = False
        self.stats = dict(enqueued=0, completed=0, failed=0, cancelled=0, deleted=0, expired=0)
        self.links = {}  # parent id -> set of child ids linked to it
        self.ended = {}  # id -> its recorded end (links '='), for tasks with links or a reason
        self.ended_lately = set()  # the `ended` record: every task that ended (a run ends < 10,000)
        self.outbox = set()  # ids whose children are still to be told
        self.take_seq = 0
        self.leases = 0  # the queue's lease counter: every delivery and fencing takes the next
        #: the workers Redis woke during the operation being modelled (read from their channels
        #: before the model runs it): which idle workers a wake-up pops is random in Redis
        self.to_wake = set()
        # limits in force (None: none): concurrency, rate starts, per partition the same
        self.limits = dict(c=None, rn=None, pc=None, prn=None)
        self.overrides = False  # overrides are stored (the limits hash exists, even all '-')
        self.starts = 0  # starts logged while a rate was set (the window never passes)
        self.pstarts = {}  # partition -> starts logged while a partition rate was set
        self.plists = {}  # partition -> deque of ids (entries of removed tasks included)
        self.pstate = {}  # partition -> 'r' (in the ring), 'b' (concurrency), 'w' (rate)
        self.ring = deque()  # partitions, stale entries included
        self.pactive = {}  # partition -> active tasks

    # -- limits ------------------------------------------------------------------------------

    def active_count(self, leaving=None):
        return sum(1 for t in self.tasks.values() if t.state == "active" and t is not leaving)

    def running_count(self, leaving=None):
        """What counts under the queue's concurrency: active tasks and kept slots."""
        return self.active_count(leaving) + len(self.kept)

    def room(self, leaving=None):
        room = float("inf")
        if self.limits["c"] is not None:
            room = self.limits["c"] - self.running_count(leaving)
        if self.limits["rn"] is not None:
            room = min(room, self.limits["rn"] - self.starts)
        return max(room, 0)

    def listed_runnable(self):
        return len(self.front) + len(self.pending) + len(self.ring)

    def ring_partition(self, part):
        s = self.pstate.get(part)
        if s == "r":
            return True
        if s is not None:
            return False
        self.pstate[part] = "r"
        self.ring.append(part)
        return True

    def next_partitioned(self):
        """An id, False (held back or stale), or None (ring empty), as the script."""
        if not self.ring:
            return None
        part = self.ring.popleft()
        if self.pstate.get(part) != "r":
            return False
        if self.limits["pc"] is not None and self.pactive.get(part, 0) >= self.limits["pc"]:
            self.pstate[part] = "b"
            return False
        if self.limits["prn"] is not None and self.pstarts.get(part, 0) >= self.limits["prn"]:
            self.pstate[part] = "w"
            return False
        lst = self.plists[part]
        tid = lst.popleft()
        if lst:
            self.ring.append(part)
        else:
            del self.plists[part]
            del self.pstate[part]
        return tid

    def limits_left(self, part, leaving=None):
        """A task of ``part`` left the active state (``leaving``, still marked active here) or a
        kept slot was released."""
        wakeup = False
        if part is not None:
            self.pactive[part] -= 1
            if self.pactive[part] <= 0:
                del self.pactive[part]
            if self.pstate.get(part) == "b":
                self.pstate[part] = "r"
                self.ring.append(part)
                wakeup = True
        c = self.limits["c"]
        if not wakeup and c is not None and self.running_count(leaving) == c - 1 and self.listed_runnable() > 0:
            wakeup = True
        if wakeup:
            self.wake(1)

    def set_limits(self, values, overrides=True):
        """``values``: the limits in force after the call (overrides and handler's settled);
        ``overrides``: whether overrides are stored after it (False after a reset)."""
        self.limits = dict(values)
        self.overrides = overrides
        for part in sorted(p for p, s in self.pstate.items() if s == "w"):
            self.pstate[part] = "r"
            self.ring.append(part)
        pc = self.limits["pc"]  # then those parked by a concurrency the new one lets run
        for part in sorted(p for p, s in self.pstate.items() if s == "b" and (pc is None or self.pactive[p] < pc)):
            self.pstate[part] = "r"
            self.ring.append(part)
        self.wake(min(len(self.idle), self.listed_runnable(), self.room()))

    def new_lease(self):
        self.leases += 1
        return self.leases

    def wake(self, n):
        """Pop min(n, idle) idle workers, those Redis woke."""
        k = min(n, len(self.idle))
        chosen = sorted(self.to_wake & self.idle)[:k]
        if len(chosen) < k:
            raise ModelError(
                f"a wake-up of {k} idle worker(s) {sorted(self.idle)}, but redis woke {sorted(self.to_wake)}"
            )
        self.idle -= set(chosen)
        self.to_wake -= set(chosen)

    # -- helpers mirroring the Lua includes --------------------------------------------------

    def _wait(self, t, first):
        q = self.waits.setdefault(t.lock, deque())
        q.appendleft(t.id) if first else q.append(t.id)
        t.state = "waiting"

    def make_runnable(self, t, where):
        if t.lock is not None:
            if t.lock in self.heads or t.lock in self.holder:
                self._wait(t, where == "front")
                return False
            self.heads[t.lock] = t.id
        t.state = "pending"
        if t.part is not None:
            return self.list_in_partition(t, where == "front")
        self.front.appendleft(t.id) if where == "front" else self.pending.append(t.id)
        return True

    def list_in_partition(self, t, first):
        lst = self.plists.setdefault(t.part, deque())
        lst.appendleft(t.id) if first else lst.append(t.id)
        return self.ring_partition(t.part)

    def promote_waiter(self, lock):
        if lock in self.heads or lock in self.holder:
            return
        q = self.waits.get(lock)
        if not q:
            return
        tid = q.popleft()
        if not q:
            del self.waits[lock]
        t = self.tasks[tid]
        self.heads[lock] = tid
        t.state = "pending"
        if t.part is not None:
            if self.list_in_partition(t, True):
                self.wake(1)
            return
        self.front.append(tid)
        self.wake(1)

    def release_lock(self, t, lease, requeued):
        if self.holder.get(t.lock) == f"{t.id}:{lease}":
            del self.holder[t.lock]
        if not requeued:
            self.promote_waiter(t.lock)

    def leave_active(self, t, lease, mode):
        self.owned[t.worker].discard(t.id)
        holder = f"{t.id}:{lease}"
        keep = mode == "keep" and t.worker is not None
        if keep and (t.part is not None or self.limits["c"] is not None):
            self.kept[holder] = t.part  # its slots stay taken until the handler returns
            self.held.setdefault(t.worker, OrderedDict()).setdefault(holder, "")
        else:
            self.limits_left(t.part, t)
        if t.lock is None:
            return
        if keep and self.holder.get(t.lock) == holder:
            self.held.setdefault(t.worker, OrderedDict())[holder] = t.lock
            return
        self.release_lock(t, lease, mode == "requeue")

    def clear_unique(self, t):
        if t.unique is not None and self.unique.get(t.unique) == t.id:
            del self.unique[t.unique]

    def forget(self, t, outcome=None, reason=False):
        self.clear_unique(t)
        del self.tasks[t.id]
        if outcome is not None:
            self.task_ended(t.id, outcome, reason)

    def task_ended(self, tid, outcome, reason=False):
        """Mirror of includes/links.lua: every end is recorded (an id enqueued again is left as it
        is); the first end counts, and is told only with links or a reason."""
        self.ended_lately.add(tid)
        if tid not in self.links and tid not in self.ended and not reason:
            return
        if tid in self.ended:
            return
        self.ended[tid] = outcome
        self.outbox.add(tid)

    def requeue_front(self, t):
        if t.cancel:
            self.forget(t, "cancelled")
            self.stats["cancelled"] += 1
            if t.lock is not None:
                self.promote_waiter(t.lock)
            return False
        t.worker = None
        self.make_runnable(t, "front")
        return True

    def release_held(self, worker, holders):
        mine = self.held.get(worker, OrderedDict())
        for holder in list(mine) if holders is None else holders:
            lock = mine.pop(holder, None)
            if lock is None:
                continue
            if lock != "":
                if self.holder.get(lock) == holder:
                    del self.holder[lock]
                self.promote_waiter(lock)
            if holder in self.kept:
                self.limits_left(self.kept.pop(holder))

    def take(self, worker, count):
        taken = []
        count = min(count, self.room())
        while len(taken) < count:
            if self.front:
                tid = self.front.popleft()
            elif self.pending:
                tid = self.pending.popleft()
            else:
                tid = self.next_partitioned()
                if tid is None:
                    break
                if tid is False:
                    continue
            t = self.tasks.get(tid)
            if t is None or t.state != "pending":
                continue  # the entry of a removed task (its id may be pending again, listed later)
            if t.expires:  # past its expiry: it never starts (includes/expiry.lua)
                if t.lock is not None and self.heads.get(t.lock) == tid:
                    del self.heads[t.lock]
                    self.promote_waiter(t.lock)
                self.forget(t, "expired")
                self.stats["expired"] += 1
                continue
            if t.lock is not None:
                if self.heads.get(t.lock) == tid:
                    del self.heads[t.lock]
                if t.lock in self.holder:
                    raise ModelError(f"runnable task {tid} found its lock {t.lock} held by {self.holder[t.lock]}")
            t.lease = self.new_lease()
            t.attempts += 1
            if t.lock is not None:
                self.holder[t.lock] = f"{tid}:{t.lease}"
            t.state, t.worker = "active", worker
            if self.limits["rn"] is not None:
                self.starts += 1
            if t.part is not None:
                self.pactive[t.part] = self.pactive.get(t.part, 0) + 1
                if self.limits["prn"] is not None:
                    self.pstarts[t.part] = self.pstarts.get(t.part, 0) + 1
            self.take_seq += 1
            t.started = self.take_seq
            self.owned.setdefault(worker, set()).add(tid)
            taken.append((tid, t.lease))
        c, pc = self.limits["c"], self.limits["pc"]
        if taken and c is not None and self.running_count() > c:
            raise ModelError(f"{self.running_count()} running handlers started past the concurrency {c}")
        for tid, _ in taken:
            part = self.tasks[tid].part
            if part is not None and pc is not None and self.pactive[part] > pc:
                raise ModelError(f"partition {part} started past its concurrency {pc}")
        return taken

    def remove_inactive(self, t, outcome):
        if t.state == "pending":
            pass  # its entry stays on its list (front, pending or its partition's), skipped when reached
        elif t.state == "waiting":
            self.waits[t.lock].remove(t.id)
            if not self.waits[t.lock]:
                del self.waits[t.lock]
        self.forget(t, outcome)
        if t.state == "pending" and t.lock is not None and self.heads.get(t.lock) == t.id:
            del self.heads[t.lock]
            self.promote_waiter(t.lock)

    # -- operations (each returns what the script should reply) -----------------------------

    def link(self, parents, children):
        """What ``link`` answers per parent ('w': linked, or its end), linking live ones."""
        out = []
        for p in parents:
            t = self.tasks.get(p)
            if p in self.ended:
                out.append(self.ended[p])
            elif t is None:
                raise ModelError(f"link to unknown parent {p}")
            elif t.state == "failed":
                out.append("failed")
            else:
                out.append("w")
        for p, o in zip(parents, out):
            if o == "w":
                self.links.setdefault(p, set()).update(children)
        return out

    def enqueue(self, ids, lock, unique, delayed, retries, handed, part=None, remember=False, deps=None, expired=False):
        """``handed``: the (worker, id, lease) hand-overs Redis published, in order. Returns the
        ids replied. An id that exists, ended, or was remembered, is left as it is. ``deps``: ([(parent,
        'w' or its end)], run_anyway) for tasks with after=. ``expired``: enqueued with an expiry
        already past (each expires when a take reaches it)."""
        out, runnable = [], 0
        for tid in ids:
            if unique is not None and unique in self.unique:
                out.append(self.unique[unique])
                continue
            if tid in self.tasks or tid in self.ended_lately or (remember and tid in self.remembered):
                if remember:
                    self.remembered.add(tid)
                out.append(tid)
                continue
            if remember:
                self.remembered.add(tid)
            t = self.tasks[tid] = Task(tid, lock, unique, retries, part)
            t.expires = expired
            if unique is not None:
                self.unique[unique] = tid
            self.stats["enqueued"] += 1
            why = False
            if deps is not None:
                told, t.run_anyway = deps
                for p, o in told:
                    if o == "w":
                        t.waitfor.add(p)
                    elif o != "completed" and not t.run_anyway:
                        why = True
            if why:
                self.forget(t, "cancelled", reason=True)
                self.stats["cancelled"] += 1
            elif t.waitfor:
                t.state, t.delayed = "blocked", delayed
            elif delayed:
                t.state = "delayed"
            elif self.make_runnable(t, "tail"):
                runnable += 1
            out.append(tid)
        runnable = min(runnable, self.room())
        pushed = 0
        rated = self.limits["rn"] is not None or self.limits["prn"] is not None  # woken, not handed tasks
        if runnable and not self.paused and not rated:
            for worker, tid, lease in handed:
                if worker not in self.idle:
                    raise ModelError(f"handed a task to {worker}, which was not idle")
                self.idle.discard(worker)
                if self.take(worker, 1) != [(tid, lease)]:
                    raise ModelError(f"hand-over of {tid}:{lease} to {worker} is not the task first in line")
                pushed += 1
            if pushed < runnable and self.idle:
                # the script tried one more idle worker and found nothing to take for it (the
                # limits held the rest back); that attempt still parked the partitions it met
                if self.take(None, 1):
                    raise ModelError("an idle worker was not handed a task the model would take")
        elif handed:
            raise ModelError("a hand-over while paused or with nothing runnable")
        self.wake(runnable - pushed)
        return out

    def push(self, tid):
        """``push`` (Queue.enqueue's short road for one plain task): None when it declines (an
        idle worker to hand the task to, or limits stored: nothing written), else the id; an id
        whose task exists or ended is left as it is (``remember`` plays no part)."""
        if self.idle or self.overrides:
            return None
        if tid not in self.tasks and tid not in self.ended_lately:
            t = self.tasks[tid] = Task(tid, None, None, 0)
            self.stats["enqueued"] += 1
            t.state = "pending"
            self.pending.append(tid)
        return tid

    def resolve(self, items):
        """Tell children that a parent ended: one code per (child, parent, outcome) as the script."""
        codes, runnable = [], 0
        for child, parent, outcome in items:
            t = self.tasks.get(child)
            if t is None or parent not in t.waitfor or t.state != "blocked":
                codes.append(0)
                continue
            t.waitfor.discard(parent)
            if outcome == "completed" or t.run_anyway:
                if t.waitfor:
                    codes.append(3)
                    continue
                if t.delayed:
                    t.state = "delayed"
                elif self.make_runnable(t, "tail"):
                    runnable += 1
                codes.append(1)
            else:
                self.forget(t, "cancelled", reason=True)
                self.stats["cancelled"] += 1
                codes.append(2)
        self.wake(runnable)
        return codes

    def outbox_done(self, ids):
        self.outbox -= set(ids)

    def finish(self, worker, acks):
        codes = []
        for tid, lease, keep in acks:
            t = self.tasks.get(tid)
            if t is None or t.lease != lease or t.state != "active":
                codes.append(Code.STALE)
                continue
            self.leave_active(t, lease, "keep" if keep else "release")
            self.forget(t, "cancelled" if t.cancel else "completed")
            if t.cancel:
                self.stats["cancelled"] += 1
                codes.append(Code.CANCELLED)
            else:
                self.stats["completed"] += 1
                codes.append(Code.COMPLETED)
        return codes

    def start(self, worker, count, acks):
        codes = self.finish(worker, acks) if acks else []
        if count == 0:
            return Code.OK, [], codes
        if worker not in self.workers:
            return Code.NOT_REGISTERED, [], codes
        if self.paused:
            self.idle.add(worker)
            return Code.PAUSED, [], codes
        taken = self.take(worker, count)
        if len(taken) < count:
            self.idle.add(worker)
        else:
            self.idle.discard(worker)
        return Code.OK, taken, codes

    def fail(self, worker, tid, lease, keep):
        t = self.tasks.get(tid)
        if t is None or t.lease != lease or t.state != "active":
            return Code.STALE
        self.leave_active(t, lease, "keep" if keep else "release")
        if t.cancel:
            self.forget(t, "cancelled")
            self.stats["cancelled"] += 1
            return Code.CANCELLED
        t.worker = worker
        if t.attempts <= t.retries:
            t.state = "delayed"  # far in the future: never due in the model
            return Code.RETRYING
        t.state = "failed"
        self.clear_unique(t)
        self.task_ended(t.id, "failed")
        self.stats["failed"] += 1
        return Code.FAILED

    def stop(self, worker, items):
        codes = [None] * len(items)
        requeued = 0
        for i in range(len(items) - 1, -1, -1):
            tid, lease, keep = items[i]
            t = self.tasks.get(tid)
            if t is None or t.lease != lease or t.state != "active":
                codes[i] = Code.STALE
                continue
            mode = "keep" if keep else ("release" if t.cancel else "requeue")
            self.leave_active(t, lease, mode)
            t.attempts -= 1
            if self.requeue_front(t):
                requeued += 1
                codes[i] = Code.REQUEUED
            else:
                codes[i] = Code.CANCELLED
        self.wake(requeued)
        return codes

    def release(self, worker, holders):
        self.release_held(worker, holders)

    def pause(self, paused):
        was, self.paused = self.paused, paused
        if was and not paused:
            self.wake(len(self.idle))

    def cancel(self, tid):
        t = self.tasks.get(tid)
        if t is None:
            return Code.UNKNOWN
        if t.state == "active":
            t.cancel = True
            return Code.STOPPING
        if t.state == "failed":
            return Code.FINISHED
        self.remove_inactive(t, "cancelled")
        self.stats["cancelled"] += 1
        return Code.REMOVED

    def delete(self, tid, finished_only=False):
        t = self.tasks.get(tid)
        if t is None:
            return Code.UNKNOWN
        if t.state == "active":
            return Code.ACTIVE
        if finished_only and t.state != "failed":  # the model keeps no completed task
            return Code.NOT_FINISHED
        self.remove_inactive(t, "deleted")
        self.stats["deleted"] += 1
        return Code.DELETED

    def retry(self, tid):
        t = self.tasks.get(tid)
        if t is None:
            return Code.UNKNOWN
        if t.state != "failed":
            return Code.NOT_FAILED
        t.attempts = 0
        self.ended.pop(tid, None)
        self.ended_lately.discard(tid)
        if t.unique is not None and t.unique not in self.unique:
            self.unique[t.unique] = tid
        if self.make_runnable(t, "tail"):
            self.wake(1)
        return Code.REQUEUED

    def purge_all(self):
        n = 0
        for lock in list(self.waits):
            for tid in self.waits.pop(lock):
                self.forget(self.tasks[tid], "deleted")
                n += 1
        listed = [*self.front, *self.pending, *(i for lst in self.plists.values() for i in lst)]
        for tid in listed:
            t = self.tasks.get(tid)
            if t is None or t.state != "pending":
                continue  # the entry of a removed task
            if t.lock is not None and self.heads.get(t.lock) == tid:
                del self.heads[t.lock]
            self.forget(t, "deleted")
            n += 1
        self.front.clear()
        self.pending.clear()
        self.plists.clear()
        self.pstate.clear()  # the ring's entries stay, stale
        self.stats["deleted"] += n
        return n

    def fail_worker(self, worker, order):
        """``order``: the worker's task ids, latest-started first (as the script sorts them)."""
        self.idle.discard(worker)
        requeued = 0
        for tid in order:
            t = self.tasks[tid]
            if t.state != "active" or t.worker != worker:
                continue
            self.leave_active(t, t.lease, "release" if t.cancel else "requeue")
            t.lease = self.new_lease()
            if self.requeue_front(t):
                requeued += 1
        self.release_held(worker, None)
        self.owned.pop(worker, None)
        self.workers.discard(worker)
        self.wake(requeued)
        return requeued

    # -- views ---------------------------------------------------------------------------

    def active_of(self, worker):
        return sorted(
            (t for t in self.tasks.values() if t.state == "active" and t.worker == worker), key=lambda t: t.started
        )

    def in_state(self, state):
        return [t for t in self.tasks.values() if t.state == state]
