-- Read a record for an operator, without changing it.
-- KEYS[1] the record: a string in today's layout, or a hash in the layout of
--         earlier versions (s = state, f = fingerprint, r = result).
-- Returns {} when there is none, {'s', record, pttl} for a string, or
-- {'h', state, fingerprint, result, pttl} for a hash.
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then
  return {}
end
local pttl = redis.call('PTTL', KEYS[1])
if t == 'hash' then
  local r = redis.call('HMGET', KEYS[1], 's', 'f', 'r')
  return {'h', r[1] or '', r[2] or '', r[3] or '', pttl}
end
return {'s', redis.call('GET', KEYS[1]), pttl}
