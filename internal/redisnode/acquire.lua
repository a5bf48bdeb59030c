-- Take the lock and issue the next fencing token, in one step: SET NX PX
-- takes it, next_token (token.lua) issues the token.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters flag (one hash tag)
-- ARGV[1] owner, ARGV[2] lease ms, ARGV[3] counter retention ms,
-- ARGV[4] waiters-flag lifetime ms. An owner's first 16 bytes are its
-- Locker's (lock.Manager's), the same for all its leases.
-- Returns the token (> 0) when taken; else minus the holder's remaining lease
-- in ms, at least 1 (a lease in its last millisecond is not "unknown"), or 0
-- when that is unknown; or other_mode's error (modes.lua). The name's other
-- modes cost nothing here unless the lock key holds their mark (modes.lua),
-- so the common case is three commands: SET NX PX, TIME and SET ... GET.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return next_token(KEYS[2], ARGV[3])
end
local holder = redis.pcall('GET', KEYS[1])
if holder == MODE_MARK then
	-- A read-write lock or a semaphore holds the name, or did (modes.lua).
	local lk = KEYS[1]
	local other = other_mode(false, lk .. ':rw:writer', lk .. ':rw:readers', lk .. ':sem', lk .. ':sem:holders')
	if other then
		return other
	end
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return next_token(KEYS[2], ARGV[3])
end
-- A lock holds the name, and someone waits. If the holder is another Locker's, releases of this key
-- must publish a wake-up, and the flag says so; if the holder is the
-- waiter's own Locker's, that Locker wakes its waiter when it releases, and
-- no release needs to publish for it.
if type(holder) ~= 'string' or string.sub(holder, 1, 16) ~= string.sub(ARGV[1], 1, 16) then
	redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl >= 0 then
	return -math.max(pttl, 1)
end
return 0
