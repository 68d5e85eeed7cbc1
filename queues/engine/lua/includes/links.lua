-- @include resend
-- @include history
-- Workflows. A task's children (enqueued with after=[it]) and its batch live in other slots, so
-- they are told of its end by a separate step (workflows.drain): here its end is only recorded,
-- in O(1): its outcome in links:<id> ('=' completed, failed, cancelled or deleted, 'b' its
-- batch) and its id in the outbox. Every later step is idempotent, and the outbox is swept.

local function links_key(id) return PREFIX .. '@@links@@:' .. id end
local function parents_key(id) return PREFIX .. '@@parents@@:' .. id end

-- How long a told record is kept (a child enqueued late, a sweep): a day.
local LINKS_KEEP_MS = 86400000

local outbox_told = false
local ended_trimmed = false

-- An outcome's code in `ended` (keys.ENDED_OUTCOMES).
local function end_code(outcome)
  if outcome == 'failed' then return 1 elseif outcome == 'cancelled' or outcome == 'expired' then return 2
  elseif outcome == 'deleted' then return 3 end
  return 0
end

-- Record that task id ended with `outcome` in the queue's `ended` zset (member: the id's 16 hex
-- digits; score: now * 4 + the outcome's code, keys.ENDED_OUTCOMES), so a child enqueued after=[id] once it has gone (no
-- kept result, no children) still learns how it ended, and an enqueue of id sent again adds
-- nothing (resend.lua). Its first end counts (NX). Trimmed once per script call (trim_ended).
local function record_end(id, outcome, now)
  rcall('ZADD', ENDED, 'NX', string.format('%.0f', now * 4 + end_code(outcome)), string.sub(id, -16))  -- the queue goes without saying
  if not ended_trimmed then
    ended_trimmed = true
    trim_ended(now)
  end
end

-- record_end for many tasks of one outcome at once (one ZADD per 500).
local function record_ends(ids, outcome, now)
  if #ids == 0 then return end
  local score = string.format('%.0f', now * 4 + end_code(outcome))
  for s = 1, #ids, 500 do
    local args = {}
    for i = s, math.min(s + 499, #ids) do
      args[#args + 1], args[#args + 2] = score, string.sub(ids[i], -16)
    end
    rcall('ZADD', ENDED, 'NX', unpack(args))
  end
  if not ended_trimmed then
    ended_trimmed = true
    trim_ended(now)
  end
end

-- The W3C traceparent of the run span that ended a task, by id, given by the worker's call
-- (tracing on): kept with the end ('rt'), for its children's and batch's spans to link to.
local run_traces = {}

-- The links' part of task id's end (its batch bt, np: it had parents, as its hash says): its
-- children and batch, if any, are to be told.
local function tell_ended(id, outcome, bt, np, now, worker, reason)
  if np then rcall('DEL', parents_key(id)) end
  local lk = links_key(id)
  if not bt and not reason and rcall('EXISTS', lk) == 0 then return end  -- a reason is kept a day
  if rcall('HSETNX', lk, '=', outcome) == 0 then return end
  if bt then rcall('HSET', lk, 'b', bt) end
  if run_traces[id] then rcall('HSET', lk, 'rt', run_traces[id]) end
  if reason then rcall('HSET', lk, 'why', reason) end
  rcall('ZADD', K.outbox, now, id)
  if worker and not outbox_told then
    outbox_told = true
    rcall('PUBLISH', CONTROL .. worker, 'o ' .. QUEUE)
  end
end

-- Task id (its hash tk still there) ended with `outcome`. Its children and batch, if any, are
-- to be told: the outbox gets it, and `worker` (if given) is told once per call to drain the
-- outbox now. Only its first ending counts (a failed task deleted later has ended already).
local function task_ended(id, tk, outcome, now, worker, reason)
  record_end(id, outcome, now)
  keep_history(id, tk, outcome, now, worker, reason)
  local f = rcall('HMGET', tk, 'bt', 'np')
  tell_ended(id, outcome, f[1], f[2], now, worker, reason)
end
