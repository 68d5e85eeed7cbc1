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

-- An integral number as text ('%d'): what Redis would be handed, or a string joined to, without
-- the '%.17g' (or tostring's '%.14g') printf of a floating-point number.
local function int_text(n) return string.format('%d', n) end

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
local function forget_tags(id, tg)
  if tg then
    for t in string.gmatch(tg, '[^\n]+') do rcall('ZREM', tag_key(t), id) end
  end
end

local function forget(id, tk)
  forget_tags(id, rcall('HGET', tk, 'tg'))
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

-- A task's state from its fields 's' and 'c' (as HMGET gives them): enqueue writes a pending
-- task without 's' (12 bytes less per task: its listpack fits a smaller allocation), so 'c'
-- (always written) without 's' is 'pending'; neither is no task (false).
local function state_of(s, c)
  return s or (c and 'pending') or false
end

-- Append a new task's payload to `fields` (for its HSET): in field 'p', or, longer than 64 bytes
-- (Redis's default hash-max-listpack-value) and at most @@payload_pieces_max@@ pieces, in pieces
-- of @@payload_piece@@ bytes, fields '1', '2'... (task.py), so the hash stays a compact listpack.
local function add_payload(fields, payload)
  local n = #payload
  if n <= 64 or n > @@payload_piece@@ * @@payload_pieces_max@@ then
    fields[#fields + 1] = 'p'
    fields[#fields + 1] = payload
    return
  end
  local k = 0
  for i = 1, n, @@payload_piece@@ do
    k = k + 1
    -- the field's name as a string: a number argument would cost Redis a printf ('%.17g')
    if k < 10 then fields[#fields + 1] = string.char(48 + k) else fields[#fields + 1] = '1' .. string.char(38 + k) end
    fields[#fields + 1] = string.sub(payload, i, i + @@payload_piece@@ - 1)
  end
end

-- The payload of task `tk` from an HMGET reply `f` whose fields from `i` on are
-- @@payload_fields@@: 'p', or its pieces joined (false if the task is gone). The first two
-- pieces (payloads up to 126 bytes) come with the caller's HMGET; a full second piece means
-- there may be more: they are read here.
local function joined_payload(f, i, tk)
  if f[i] or not f[i + 1] then return f[i] end
  if not f[i + 2] then return f[i + 1] end
  if #f[i + 2] < @@payload_piece@@ then return f[i + 1] .. f[i + 2] end
  local parts = {f[i + 1], f[i + 2]}
  for _, v in ipairs(rcall('HMGET', tk, @@payload_more_fields@@)) do
    if not v then break end
    parts[#parts + 1] = v
  end
  return table.concat(parts)
end
