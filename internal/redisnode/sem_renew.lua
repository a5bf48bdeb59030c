-- Extend a semaphore holder's lease if it has not ended.
-- KEYS[1] lease ends, KEYS[2] holders, KEYS[3] the name's lock key, which
-- keeps the mark of another mode for the new lease (hold_mode, modes.lua);
-- one hash tag. ARGV[1] owner, ARGV[2] lease ms. Returns 1 if extended,
-- else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not ends or ends <= now then
	return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIREAT', KEYS[1], latest)
redis.call('PEXPIREAT', KEYS[2], latest)
hold_mode(KEYS[3], ARGV[2])
return 1
