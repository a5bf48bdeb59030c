-- other_mode refuses an acquisition while its name is held in another mode:
-- one name is one resource, so a lock (an election's term included), a
-- read-write lock and a semaphore of one name exclude each other. Pass the
-- keys of the modes other than the caller's, false for its own: the lock,
-- the read-write lock's writer and readers, the semaphore's lease ends and
-- holders (all under the name's hash tag). Returns false when none holds the
-- name, else an error reply "MODE lock", "MODE read-write lock" or
-- "MODE semaphore N". Every script that takes a name starts with this file
-- (see withModes); the common case, no other mode's key, costs one EXISTS.
local function other_mode(lock, writer, readers, ends, holders)
	local ks = {}
	for _, k in pairs({lock, writer, readers, ends}) do
		if k then
			ks[#ks + 1] = k
		end
	end
	if redis.call('EXISTS', unpack(ks)) == 0 then
		return false
	end
	if lock and redis.call('EXISTS', lock) == 1 then
		return redis.error_reply('MODE lock')
	end
	if writer and redis.call('EXISTS', writer) == 1 then
		return redis.error_reply('MODE read-write lock')
	end
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	-- Readers and permits whose lease ended hold nothing.
	if readers and redis.call('ZCOUNT', readers, '(' .. now, '+inf') > 0 then
		return redis.error_reply('MODE read-write lock')
	end
	if ends and redis.call('ZCOUNT', ends, '(' .. now, '+inf') > 0 then
		return redis.error_reply('MODE semaphore ' .. (redis.call('HGET', holders, 'n') or '0'))
	end
	return false
end

