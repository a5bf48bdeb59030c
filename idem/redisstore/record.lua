-- Turn the caller's claim into an outcome.
-- KEYS[1] the record; ARGV[1] owner token; ARGV[2] result; ARGV[3] retention, milliseconds.
-- Returns 1, or 0 when the token does not own an in-progress claim.
if redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 's', 'd', 'r', ARGV[2])
redis.call('HDEL', KEYS[1], 't')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
