-- @include base
-- The record of ended tasks (keys.py: `history`, and one index per outcome): what the task page,
-- search and the API show once a task has ended. One JSON entry per task in the queue's hash
-- `history` (the task's fields as task.py names them, its payload up to @@history_payload_max@@
-- bytes, its last @@history_log_lines@@ log lines), its id in the index of its outcome (score:
-- when it ended, ms). Pruned by the workers in bounded steps (prune_history, history.py), never
-- here: writing a record is O(1) plus the size of the task. Built from the prefix, as `ended`
-- is: every script that ends a task writes it.

local HISTORY = PREFIX .. '@@history@@'
local AGAIN = PREFIX .. '@@again@@'  -- runs again -> the task they run again (note_again)
-- An expired task's record (state 'expired') is indexed, and kept, with the cancelled ones.
local HISTORY_KEYS = {PREFIX .. '@@hcompleted@@', PREFIX .. '@@hcancelled@@', PREFIX .. '@@hfailed@@'}
local HISTORY_INDEX = {
  completed = HISTORY_KEYS[1], cancelled = HISTORY_KEYS[2], expired = HISTORY_KEYS[2], failed = HISTORY_KEYS[3],
}

-- A payload's fields: 'p', or its pieces '1', '2'... (base.lua's add_payload).
local PAYLOAD_FIELDS = {@@payload_fields@@, @@payload_more_fields@@}

-- The record of task id (rec: its hash as a table of field -> value, which this takes over and
-- changes) that ended with `outcome` at `now`, by `worker` (if known), for `reason` (if given),
-- as JSON; nil when none is kept (a task that had ended already as failed keeps that record).
local function history_record(id, rec, outcome, now, worker, reason)
  if outcome ~= 'failed' and rec.s == 'failed' then return nil end  -- it ended already
  if not rec.p and rec['1'] then  -- its payload in pieces: joined
    local pieces = {}
    for i = 2, #PAYLOAD_FIELDS do
      local f = PAYLOAD_FIELDS[i]
      if not rec[f] then break end
      pieces[#pieces + 1] = rec[f]
      rec[f] = nil
    end
    rec.p = table.concat(pieces)
  end
  if rec.p and #rec.p > @@history_payload_max@@ then
    rec.ps = #rec.p
    rec.p = string.sub(rec.p, 1, @@history_payload_max@@)
  end
  rec.tb = rec.tb and string.sub(rec.tb, -@@history_payload_max@@) or nil
  rec.s, rec.fin = outcome, int_text(now)
  if worker then rec.w = worker end
  if reason then rec.why = reason end
  local log = rcall('LRANGE', log_key(id), '-@@history_log_lines@@', '-1')
  if #log > 0 then
    rec.log = log
    rec.ln = rcall('LLEN', log_key(id))
  end
  return cjson.encode(rec)
end

-- history_record of task id's hash as HGETALL gives it (h: field, value, ...).
local function history_entry(id, h, outcome, now, worker, reason)
  local rec = {}
  for i = 1, #h, 2 do rec[h[i]] = h[i + 1] end
  return history_record(id, rec, outcome, now, worker, reason)
end

-- Keep the record of task id (its hash tk still there) that ended with `outcome` at `now`, by
-- `worker` (if known), for `reason` (if given). A task deleted leaves none; a failed task that is
-- cancelled or deleted later keeps its record as failed.
local function keep_history(id, tk, outcome, now, worker, reason)
  local index = HISTORY_INDEX[outcome]
  if not index then return end
  local h = rcall('HGETALL', tk)
  if #h == 0 then return end
  local entry = history_entry(id, h, outcome, now, worker, reason)
  if not entry then return end
  rcall('HSET', HISTORY, id, entry)
  for _, key in ipairs(HISTORY_KEYS) do
    if key == index then rcall('ZADD', key, now, id) else rcall('ZREM', key, id) end
  end
end

-- keep_history for many tasks of one outcome at once: `entries` is {id, JSON, id, JSON, ...}
-- (history_entry's), written with one command per key.
local function keep_histories(entries, outcome, now)
  local index = HISTORY_INDEX[outcome]
  if not index or #entries == 0 then return end
  local now_s = int_text(now)
  for s = 1, #entries, 1000 do
    local last = math.min(s + 999, #entries)
    rcall('HSET', HISTORY, unpack(entries, s, last))
    local scored, ids = {}, {}
    for i = s, last, 2 do
      scored[#scored + 1], scored[#scored + 2] = now_s, entries[i]
      ids[#ids + 1] = entries[i]
    end
    for _, key in ipairs(HISTORY_KEYS) do
      if key == index then rcall('ZADD', key, unpack(scored)) else rcall('ZREM', key, unpack(ids)) end
    end
  end
end
