-- Replace the owner of a held lock, keeping its expiry (compare-and-set),
-- and publish the change as a release is published, so watchers read it.
-- KEYS[1] lock; ARGV[1] owner, ARGV[2] new owner, ARGV[3] release channel,
-- ARGV[4] the Locker id that prefixes the message (16 bytes).
-- Returns 1 if replaced, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl <= 0 then
	return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', pttl)
redis.call('PUBLISH', ARGV[3], ARGV[4] .. KEYS[1])
return 1
