-- Raise a node's fencing counter to the token a Redlock acquisition took from
-- its quorum, if the node still holds the lock for owner (see the package doc
-- for why this write-back makes tokens increase across holders).
-- KEYS[1] lock, KEYS[2] fencing counter (one hash tag); ARGV[1] owner,
-- ARGV[2] token (decimal), ARGV[3] counter retention ms.
-- Returns 1 if the lock is ours and the counter is now >= the token, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local last = tonumber(redis.call('GET', KEYS[2]))
if not last or last < tonumber(ARGV[2]) then
	redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
