-- End a read-write lock's hold if it is still ours (compare-and-delete) and,
-- when that may let someone in (the writer left, or the last reader) and
-- someone has been waiting lately, publish the release.
-- KEYS as rw_acquire.lua's; ARGV[1] owner (a reader's: "<token> <owner>",
-- its member), ARGV[2] "r" or "w", ARGV[3]
-- release channel, ARGV[4] message (the releasing Locker's id and the
-- name's lock key). Returns 1 if released, else 0.
if ARGV[2] == 'w' then
	if redis.call('GET', KEYS[1]) ~= ARGV[1] then
		return 0
	end
	redis.call('DEL', KEYS[1], KEYS[2])
else
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local ends = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]))
	if not ends then
		return 0
	end
	redis.call('ZREM', KEYS[3], ARGV[1])
	if ends <= now then
		return 0
	end
	-- Only the last reader's leaving lets anyone in; count only if
	-- someone waits.
	local freed = redis.call('EXISTS', KEYS[6]) == 1 and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0
	if freed then
		redis.call('PUBLISH', ARGV[3], ARGV[4])
	end
	return 1
end
if redis.call('EXISTS', KEYS[6]) == 1 then
	redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
