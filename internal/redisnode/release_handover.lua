-- Release the lock if it is still ours and, in the same step, take it for
-- the releasing Locker's longest waiter with the next fencing token, unless
-- a waiter of another Locker marked the key (acquire.lua): then release it
-- and publish, as release.lua does, so every Locker's waiter attempts with
-- even odds. The waiter's token comes from next_token (token.lua), as an
-- acquisition's does.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters flag (one hash tag)
-- ARGV[1] owner, ARGV[2] the waiter's owner, ARGV[3] its lease ms,
-- ARGV[4] counter retention ms, ARGV[5] release channel, ARGV[6] the id
-- the message carries (see release.lua).
-- Returns the waiter's token (> 0) when handed over, -1 when released for
-- everyone, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
	redis.call('DEL', KEYS[1], KEYS[3])
	redis.call('PUBLISH', ARGV[5], ARGV[6] .. KEYS[1])
	return -1
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return next_token(KEYS[2], ARGV[4])
