-- Claim an idempotency key that held a record in the layout of earlier
-- versions, a hash (the Store runs this only after its SET found one, during
-- an upgrade).
-- KEYS[1] the record: a hash (s = state, p in progress or d done;
--         f = fingerprint; r = result), or whatever replaced it meanwhile.
-- ARGV[1] the claim in today's layout; ARGV[2] in-progress deadline, ms.
-- Returns {1} claimed (a claim in today's layout, never a hash),
-- {2, fingerprint, pttl} in progress, {3, fingerprint, result} done, or
-- {4, record} for a record in today's layout.
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'hash' then
  local r = redis.call('HMGET', KEYS[1], 's', 'f', 'r')
  if r[1] == 'p' then
    return {2, r[2] or '', redis.call('PTTL', KEYS[1])}
  end
  if r[1] == 'd' then
    return {3, r[2] or '', r[3] or ''}
  end
  return redis.error_reply('redisstore: record is a hash without a state')
end
if t == 'none' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
return {4, redis.call('GET', KEYS[1])}
