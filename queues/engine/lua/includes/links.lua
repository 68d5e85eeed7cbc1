-- @include base
-- Workflows. A task's children (enqueued with after=[it]) and its batch live in other slots, so
-- they are told of its end by a separate step (workflows.drain): here its end is only recorded,
-- in O(1): its outcome in links:<id> ('=' completed, failed, cancelled or deleted, 'b' its
-- batch) and its id in the outbox. Every later step is idempotent, and the outbox is swept.

local function links_key(id) return PREFIX .. '@@links@@:' .. id end
local function parents_key(id) return PREFIX .. '@@parents@@:' .. id end

-- How long a told record is kept (a child enqueued late, a sweep): a day.
local LINKS_KEEP_MS = 86400000

local outbox_told = false

-- The W3C traceparent of the run span that ended a task, by id, given by the worker's call
-- (tracing on): kept with the end ('rt'), for its children's and batch's spans to link to.
local run_traces = {}

-- Task id (its hash tk still there) ended with `outcome`. Its children and batch, if any, are
-- to be told: the outbox gets it, and `worker` (if given) is told once per call to drain the
-- outbox now. Only its first ending counts (a failed task deleted later has ended already).
local function task_ended(id, tk, outcome, now, worker, reason)
  local f = rcall('HMGET', tk, 'bt', 'np')
  if f[2] then rcall('DEL', parents_key(id)) end
  local lk = links_key(id)
  if not f[1] and not reason and rcall('EXISTS', lk) == 0 then return end  -- a reason is kept a day
  if rcall('HSETNX', lk, '=', outcome) == 0 then return end
  if f[1] then rcall('HSET', lk, 'b', f[1]) end
  if run_traces[id] then rcall('HSET', lk, 'rt', run_traces[id]) end
  if reason then rcall('HSET', lk, 'why', reason) end
  rcall('ZADD', K.outbox, now, id)
  if worker and not outbox_told then
    outbox_told = true
    rcall('PUBLISH', CONTROL .. worker, 'o ' .. QUEUE)
  end
end
