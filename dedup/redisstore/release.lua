-- Delete the caller's claim.
-- KEYS[1] the record; ARGV[1] owner token.
-- Returns 1, or 0 when the token does not own the claim.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
