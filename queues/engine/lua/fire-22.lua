-- Fire one tick of a schedule: enqueue its run and move the schedule on to its next tick, in one
-- step. Every worker may call this for the same tick; the first call wins and the others find
-- the schedule moved on (STALE), so each tick gives exactly one task.
-- Keys: pending front delayed active deadlines stats meta idle lockwaits lockheads leases schedules batchruns limits starts partitions ring pactive pwait unique outbox workers
-- @include schedule
-- Input: ARGV[3] name, ARGV[4] settings version the caller computed with, ARGV[5] the tick (ms)
--   the caller saw as next, ARGV[6] the next tick (ms): the one after ARGV[5] in mode 'tick',
--   the first after now in mode 'missed', ARGV[7] mode, ARGV[8] grace ms (a tick due longer ago
--   than this is missed), ARGV[9] the run's task id, ARGV[10] the run's meta (JSON).
-- Mode 'tick': the run is enqueued unless the tick is missed (due more than the grace ago, or
--   the next tick is due too), which changes nothing and answers MISSED. Mode 'missed' (after
--   an outage): with missed = 'once' one catch-up run is enqueued, with 'skip' none.
-- Either way a schedule with overlap = false whose last run is still live gets no run (SKIPPED).
-- Output: {code, next run ms (-1: none), task id or '', lateness ms, queue was new 0/1, now ms,
--   the schedule's settings version or ''}. Codes: OK (a run enqueued), SKIPPED, MISSED, EARLY
--   (not due yet), STALE (another call fired it, or it was paused or changed), UNKNOWN.
-- Events: 'enqueued' {schedule} (and 'started' when handed to an idle worker), 'schedule_skipped'
--   {schedule, reason: 'overlap' | 'missed'}.
local name, version, due, after, mode = ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local sk = schedule_key(name)
local now = now_ms()
local score = rcall('ZSCORE', K.schedules, name)
local v = rcall('HGET', sk, 'v')
if not score or not v then return {@@UNKNOWN@@, -1, '', 0, 0, now, ''} end
if tonumber(score) ~= due or v ~= version then return {@@STALE@@, next_run(score), '', 0, 0, now, v} end
if due > now then return {@@EARLY@@, due, '', 0, 0, now, v} end
local late = now - due
if mode == 'tick' and (now >= after or late > tonumber(ARGV[8])) then
  return {@@MISSED@@, due, '', late, 0, now, v}
end
local spec = cjson.decode(rcall('HGET', sk, 'spec'))
rcall('ZADD', K.schedules, after, name)
local reason = false
if mode == 'missed' and spec.missed ~= 'once' then
  reason = 'missed'
  rcall('HINCRBY', sk, 'missed', 1)
elseif not spec.overlap and last_run_live(sk) then
  reason = 'overlap'
  rcall('HINCRBY', sk, 'skipped', 1)
end
if reason then
  publish({e = 'schedule_skipped', schedule = name, reason = reason})
  return {@@SKIPPED@@, after, '', late, 0, now, v}
end
local id = ARGV[9]
local kind = 'tick'
if mode == 'missed' then
  kind = 'catchup'
  rcall('HINCRBY', sk, 'catchups', 1)
else
  record_lateness(sk, late)
end
rcall('HINCRBY', sk, 'runs', 1)
local is_new = add_run(name, sk, spec, id, ARGV[10], kind, due, now)
return {@@OK@@, after, id, late, is_new, now, v}
