-- Delete the caller's claim.
-- KEYS[1] the record; ARGV[1] the claim's prefix ('p' owner-token).
-- Returns 1, or 0 when the token does not own an in-progress claim.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
