-- Read a lock as an operator sees it, in one step.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters flag (one hash tag)
-- Returns {owner or "", remaining lease ms (PTTL), last token or "0",
-- 1 if the waiters flag is set else 0}. Preceded by modes.lua.
local owner = redis.call('GET', KEYS[1]) or ''
if owner == MODE_MARK then
	owner = '' -- held as a read-write lock or a semaphore, if at all (modes.lua)
end
return {owner, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0', redis.call('EXISTS', KEYS[3])}
