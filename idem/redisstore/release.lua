-- Delete the caller's claim.
-- KEYS[1] the record; ARGV[1] owner token.
-- Returns 1, or 0 when the token does not own an in-progress claim.
if redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
