-- Turn the caller's claim into an outcome.
-- KEYS[1] the record; ARGV[1] the claim's prefix ('p' owner-token);
-- ARGV[2] result; ARGV[3] retention, milliseconds.
-- The outcome is 'd', the fingerprint's length in decimal, ':', the
-- fingerprint (taken from the claim) and the result.
-- Returns 1, or 0 when the token does not own an in-progress claim.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local fp = string.sub(v, #ARGV[1] + 1)
redis.call('SET', KEYS[1], 'd' .. #fp .. ':' .. fp .. ARGV[2], 'PX', ARGV[3])
return 1
