-- Claim an idempotency key in one step: SET NX GET for servers before Redis
-- 7.0, which refuse NX and GET together (the Store sends that plain command
-- otherwise).
-- KEYS[1] the key's record; ARGV[1] the claim ('p' owner-token fingerprint);
-- ARGV[2] in-progress deadline, milliseconds.
-- Returns the record found (and leaves it), or nil when the claim was written.
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
