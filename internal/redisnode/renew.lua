-- Extend the lease if it is still ours (compare-and-pexpire).
-- KEYS[1] lock; ARGV[1] owner, ARGV[2] lease ms. Returns 1 if extended, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
