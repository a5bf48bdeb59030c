-- Extend a read-write lock's hold if it is still ours.
-- KEYS as rw_acquire.lua's, to KEYS[7], the name's lock key, which keeps
-- the mark of another mode for the new lease (hold_mode, modes.lua);
-- ARGV[1] owner (a reader's: "<token> <owner>", its member), ARGV[2] "r" or
-- "w", ARGV[3] lease ms, ARGV[4] the readers' keys' lifetime
-- (rw_acquire.lua's ARGV[8]). Returns 1 if extended, else 0.
local ttl = tonumber(ARGV[3])
if ARGV[2] == 'w' then
	if redis.call('GET', KEYS[1]) == ARGV[1] then
		redis.call('PEXPIRE', KEYS[1], ttl)
		redis.call('PEXPIRE', KEYS[2], ttl)
		hold_mode(KEYS[7], ttl)
		return 1
	end
	return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]))
if not ends or ends <= now then
	return 0
end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
hold_mode(KEYS[7], ttl)
return 1
