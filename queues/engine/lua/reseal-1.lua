-- Re-seal encrypted payloads with the newest key (manage.py encryption rotate, engine.rotation):
-- each task whose payload is still the sealed one that was read (it has not started, nor been
-- changed or replaced since) gets the new one, in the same fields (crypto.py).
-- Keys: stats
-- @include base
-- Input: ARGV[3] n, then n triples: task id, its sealed payload as read, the payload sealed anew.
-- Output: how many payloads were replaced.
local n, done = tonumber(ARGV[3]), 0
for i = 0, n - 1 do
  local id, old, new = ARGV[4 + 3 * i], ARGV[5 + 3 * i], ARGV[6 + 3 * i]
  local tk = task_key(id)
  local f = rcall('HMGET', tk, 's', 'y', @@payload_fields@@)
  if f[2] == 'e' and f[1] ~= 'active' and joined_payload(f, 3, tk) == old then
    rcall('HDEL', tk, @@payload_fields@@, @@payload_more_fields@@)
    local fields = {}
    add_payload(fields, new)
    rcall('HSET', tk, unpack(fields))
    done = done + 1
  end
end
return done
