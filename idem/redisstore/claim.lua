-- Claim an idempotency key in one step.
-- KEYS[1]  the key's record, a hash: s = state (p in progress, d done),
--          t = owner token (while in progress), f = fingerprint, r = result.
-- ARGV[1]  new owner token
-- ARGV[2]  request fingerprint
-- ARGV[3]  in-progress deadline, milliseconds
-- Returns {1} claimed, {2, fingerprint, pttl} in progress, {3, fingerprint, result} done.
-- An expired claim or outcome is gone (PEXPIRE, Redis's clock), so it is claimed anew;
-- every record has s, so when s is missing the key is absent and needs no DEL.
local r = redis.call('HMGET', KEYS[1], 's', 'f', 'r')
if r[1] == 'p' then
  return {2, r[2] or '', redis.call('PTTL', KEYS[1])}
end
if r[1] == 'd' then
  return {3, r[2] or '', r[3] or ''}
end
redis.call('HSET', KEYS[1], 's', 'p', 't', ARGV[1], 'f', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1}
