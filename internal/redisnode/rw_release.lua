-- End a read-write lock's hold if it is still ours (compare-and-delete) and,
-- when that may let someone in (the writer left, or the last reader) and
-- someone has been waiting lately, publish the release.
-- KEYS as rw_acquire.lua's; ARGV[1] owner (a reader's: "<token> <owner>",
-- its member), ARGV[2] "r" or "w", ARGV[3]
-- release channel, ARGV[4] message (the releasing Locker's id and the
-- name's lock key), ARGV[5] "1" if a reader's token is unknown (its
-- attempt's answer was lost) and ARGV[1] is its bare owner, to be found
-- among the members. Returns 1 if released, else 0.
if ARGV[2] == 'w' then
	if redis.call('GET', KEYS[1]) ~= ARGV[1] then
		return 0
	end
	redis.call('DEL', KEYS[1], KEYS[2])
else
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local member = ARGV[1]
	local ends = tonumber(redis.call('ZSCORE', KEYS[3], member))
	if not ends and ARGV[5] == '1' then
		local suffix = ' ' .. member
		local all = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
		for i = 1, #all, 2 do
			if string.sub(all[i], -#suffix) == suffix then
				member, ends = all[i], tonumber(all[i + 1])
				break
			end
		end
	end
	if not ends then
		return 0
	end
	redis.call('ZREM', KEYS[3], member)
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
