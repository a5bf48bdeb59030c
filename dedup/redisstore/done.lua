-- Mark the caller's claimed id done.
-- KEYS[1] the record; ARGV[1] owner token; ARGV[2] retention, milliseconds.
-- Returns 1, or 0 when the token does not own the claim.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], '=', 'PX', ARGV[2])
return 1
