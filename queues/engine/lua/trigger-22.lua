-- Run a schedule now, by hand: enqueue one run like a tick's (the schedule's next tick stays
-- as it is), paused or not, whatever its overlap setting.
-- Keys: pending front delayed active deadlines stats meta idle lockwaits lockheads leases schedules batchruns limits starts partitions ring pactive pwait unique outbox workers
-- @include schedule
-- Input: ARGV[3] name, ARGV[4] the run's task id, ARGV[5] the run's meta (JSON), ARGV[6] the
--   trigger's trace context ('' for none)
-- Output: {code, queue was new 0/1}: OK, or UNKNOWN (no such schedule)
-- Events: 'enqueued' {schedule} (and 'started' when handed to an idle worker)
local name = ARGV[3]
local sk = schedule_key(name)
local raw = rcall('HGET', sk, 'spec')
if not raw or not rcall('ZSCORE', K.schedules, name) then return {@@UNKNOWN@@, 0} end
local now = now_ms()
rcall('HINCRBY', sk, 'triggered', 1)
return {@@OK@@, add_run(name, sk, cjson.decode(raw), ARGV[4], ARGV[5], 'trigger', '', now, ARGV[6])}
