-- The prelude of every script: the queue's names, Redis time, key names and events.
-- ARGV[1] is the queue's key prefix ("worqr:{<queue>}:"), ARGV[2] the queue name. Per-task,
-- per-lock and per-worker key names are the prefix plus a kind that the loader fills in from
-- keys.py; nothing here spells a key kind by hand.
local rcall = redis.call
local PREFIX = ARGV[1]
local QUEUE = ARGV[2]
local EVENTS = PREFIX .. '@@events@@'
local CONTROL = '@@control@@'

local function now_ms()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function task_key(id) return PREFIX .. '@@task@@:' .. id end
local function lock_key(lk) return PREFIX .. '@@lock@@:' .. lk end
local function lock_wait_key(lk) return PREFIX .. '@@lockwait@@:' .. lk end
local function worker_tasks_key(w) return PREFIX .. '@@worker@@:' .. w end
local function held_key(w) return PREFIX .. '@@held@@:' .. w end
local function tag_key(t) return PREFIX .. '@@tag@@:' .. t end
local function log_key(id) return PREFIX .. '@@log@@:' .. id end

-- Remove what hangs off a task besides its hash: its entries in the tag index (tags are kept
-- in its field 'tg', one per line) and its log. Called wherever a task is deleted, cancelled or
-- completes, so neither ever outlives the task.
local function forget(id, tk)
  local tg = rcall('HGET', tk, 'tg')
  if tg then
    for t in string.gmatch(tg, '[^\n]+') do rcall('ZREM', tag_key(t), id) end
  end
  rcall('DEL', log_key(id))
end

-- Publish one event (a table) on the queue's event channel. Lists of ids are capped so a
-- bulk transition stays one small message; 'n' always carries the full count.
local function publish(event)
  event.q = QUEUE
  if event.ids and #event.ids == 0 then event.ids = nil end  -- cjson would write {} for it
  if event.ids and #event.ids > 50 then
    local head = {}
    for i = 1, 50 do head[i] = event.ids[i] end
    event.ids = head
    event.more = true
  end
  rcall('PUBLISH', EVENTS, cjson.encode(event))
end
