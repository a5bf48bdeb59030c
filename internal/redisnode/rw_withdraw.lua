-- Withdraw a waiting writer's intent and, if it had one, publish that
-- readers may get in.
-- KEYS as rw_acquire.lua's; ARGV[1] owner, ARGV[2] release channel,
-- ARGV[3] message, as rw_release.lua's. Returns 1 if an intent was removed.
if redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then
	redis.call('PUBLISH', ARGV[2], ARGV[3])
	return 1
end
return 0
