-- Take count of a semaphore's permits and issue the next fencing token, in
-- one step. The semaphore is a sorted set of its holders' lease ends (server
-- time, ms) and a hash of N, the permits used, and each holder's
-- "count token taken-at-ms"; holders whose lease ended are dropped first.
-- KEYS[1] lease ends, KEYS[2] holders, KEYS[3] fencing counter, KEYS[4]
-- waiters flag, KEYS[5..7] the name's lock and read-write writer and
-- readers, which must not hold it (one hash tag); the lock key holds the
-- mark of another mode (modes.lua) while a permit is held
-- ARGV[1] owner, ARGV[2] N, ARGV[3] count, ARGV[4] lease ms, ARGV[5] counter
-- retention ms, ARGV[6] waiters-flag lifetime ms
-- Returns the token (> 0) when taken; else minus the ms until the earliest
-- holder's lease ends (at least 1), or 0 when nobody holds; or the error
-- "MISMATCH <N>" when the holders took their permits with another N, or
-- other_mode's (modes.lua).
local other = other_mode(KEYS[5], KEYS[6], KEYS[7], false, false)
if other then
	return other
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) <= now then
	local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
	local freed = 0
	for _, o in ipairs(dead) do
		local v = redis.call('HGET', KEYS[2], o)
		if v then
			freed = freed + tonumber(string.match(v, '^%d+'))
			redis.call('HDEL', KEYS[2], o)
		end
	end
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
	if redis.call('ZCARD', KEYS[1]) == 0 then
		redis.call('DEL', KEYS[2])
	else
		redis.call('HINCRBY', KEYS[2], 'used', -freed)
	end
end

local asked = tonumber(ARGV[2])
local meta = redis.call('HMGET', KEYS[2], 'n', 'used')
local n = tonumber(meta[1])
if n and n ~= asked then
	return redis.error_reply('MISMATCH ' .. n)
end
local used = tonumber(meta[2] or '0')
local count = tonumber(ARGV[3])
if used + count > asked then
	-- Someone waits: releases must publish a wake-up.
	redis.call('SET', KEYS[4], '1', 'PX', ARGV[6])
	first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
	if first[2] then
		return -math.max(tonumber(first[2]) - now, 1)
	end
	return 0
end

local token = next_token(KEYS[3], ARGV[5])

local ends = now + tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], ends, ARGV[1])
redis.call('HSET', KEYS[2], 'n', asked, 'used', used + count,
	ARGV[1], count .. ' ' .. string.format('%d', token) .. ' ' .. now)
-- Both keys live as long as the last holder's lease.
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIREAT', KEYS[1], latest)
redis.call('PEXPIREAT', KEYS[2], latest)
hold_mode(KEYS[5], ARGV[4])
return token
