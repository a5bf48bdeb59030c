-- Give back a semaphore holder's permits (compare-and-delete by owner) and,
-- when someone has been waiting lately, publish the release.
-- KEYS[1] lease ends, KEYS[2] holders, KEYS[3] waiters flag (one hash tag)
-- ARGV[1] owner, ARGV[2] release channel, ARGV[3] the releasing Locker's id
-- (16 bytes), which prefixes the message, ARGV[4] the name's lock key, which
-- the message names, as a lock's and a read-write lock's releases do.
-- Returns 1 if the permits were held, 0 if not (an ended lease is dropped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not ends then
	return 0
end
local v = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
	redis.call('DEL', KEYS[2])
elseif v then
	redis.call('HINCRBY', KEYS[2], 'used', -tonumber(string.match(v, '^%d+')))
end
if ends <= now then
	return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
	redis.call('PUBLISH', ARGV[2], ARGV[3] .. ARGV[4])
end
return 1
