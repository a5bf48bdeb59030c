-- One name is one resource: a lock (an election's term included), a
-- read-write lock and a semaphore of one name exclude each other.
--
-- While a read-write lock or a semaphore holds a name, the name's lock key
-- holds MODE_MARK, for at least as long as any of their leases, so a lock's
-- acquisition is refused by its own SET NX and the common case, a name held
-- in no other mode, costs it nothing more. The mark is set or lengthened by
-- every acquisition and renewal of those modes (hold_mode) and never
-- shortened by their releases: a lock that finds it checks the other modes'
-- keys (other_mode) and takes the name if none holds it any more. No owner
-- can equal the mark (owners are hex ids and a label).
local MODE_MARK = 'latchkey:held-in-another-mode'

-- hold_mode keeps the mark in lock for at least ms from now. A lock key
-- holding an owner is left alone: the caller's mode was refused while it
-- was held, so that happens only after an operator deleted the mark.
local function hold_mode(lock, ms)
	local v = redis.call('GET', lock)
	if not v then
		redis.call('SET', lock, MODE_MARK, 'PX', ms)
	elseif v == MODE_MARK and redis.call('PTTL', lock) < tonumber(ms) then
		redis.call('PEXPIRE', lock, ms)
	end
end

-- other_mode refuses an acquisition while its name is held in another mode.
-- Pass the keys of the modes other than the caller's, false for its own: the
-- lock, the read-write lock's writer and readers, the semaphore's lease ends
-- and holders (all under the name's hash tag). Returns false when none holds
-- the name, else an error reply "MODE lock", "MODE read-write lock" or
-- "MODE semaphore N". Every script that takes a name asks it (see
-- withModes), a lock only once its SET NX found the mark.
local function other_mode(lock, writer, readers, ends, holders)
	if lock then
		local v = redis.call('GET', lock)
		if v and v ~= MODE_MARK then
			return redis.error_reply('MODE lock')
		end
	end
	local ks = {}
	for _, k in pairs({writer, readers, ends}) do
		if k then
			ks[#ks + 1] = k
		end
	end
	if redis.call('EXISTS', unpack(ks)) == 0 then
		return false
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

