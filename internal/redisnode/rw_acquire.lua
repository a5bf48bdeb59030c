-- One attempt at a read-write lock, and the next fencing token, in one step.
-- KEYS[1] writer (its owner), KEYS[2] writer's token, KEYS[3] readers (zset:
-- "<token> <owner>" -> lease end ms), KEYS[4] waiting writers' intents
-- (zset: owner -> end ms), KEYS[5] fencing counter, KEYS[6] waiters flag,
-- KEYS[7..9] the name's lock and semaphore lease ends and holders, which
-- must not hold it (one hash tag); the lock key holds the mark of another
-- mode (modes.lua) while this lock holds the name
-- ARGV[1] owner, ARGV[2] "r" or "w", ARGV[3] lease ms, ARGV[4] "1" if a
-- waiting writer records its intent on failure, ARGV[5] intent ms,
-- ARGV[6] counter retention ms, ARGV[7] waiters-flag lifetime ms, ARGV[8]
-- how long the readers' keys live past their last write (at least the
-- longest lease, so no live reader's entry goes with them)
-- Returns the token (> 0) when taken; else minus how long the holders that
-- keep the owner out have left in ms, at least 1, or 0 when that is
-- unknown (a reader kept out by a writer's intent); or other_mode's error
-- (modes.lua).
local other = other_mode(KEYS[7], false, false, KEYS[8], KEYS[9])
if other then
	return other
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function refuse(left)
	-- Someone waits: releases must publish a wake-up.
	redis.call('SET', KEYS[6], '1', 'PX', ARGV[7])
	if ARGV[4] == '1' then
		redis.call('ZADD', KEYS[4], now + tonumber(ARGV[5]), ARGV[1])
		redis.call('PEXPIRE', KEYS[4], ARGV[5])
	end
	if left > 0 then
		return -math.max(left, 1)
	end
	return 0
end

local wleft = redis.call('PTTL', KEYS[1])
if wleft >= 0 then
	return refuse(math.max(wleft, 1))
end
if ARGV[2] == 'r' then
	if redis.call('EXISTS', KEYS[4]) == 1 then
		redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
		if redis.call('ZCARD', KEYS[4]) > 0 then
			return refuse(0)
		end
	end
else
	-- Readers whose lease ended keep nobody out: drop them first.
	redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
	local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
	if #last > 0 then
		return refuse(math.max(tonumber(last[2]) - now, 1))
	end
end

local token = next_token(KEYS[5], ARGV[6])
local tok = string.format('%d', token)
local ttl = tonumber(ARGV[3])
if ARGV[2] == 'r' then
	redis.call('ZADD', KEYS[3], now + ttl, tok .. ' ' .. ARGV[1])
	redis.call('PEXPIRE', KEYS[3], ARGV[8])
else
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
	redis.call('SET', KEYS[2], tok, 'PX', ttl)
	if ARGV[4] == '1' then
		redis.call('ZREM', KEYS[4], ARGV[1])
	end
end
hold_mode(KEYS[7], ttl)
return token
