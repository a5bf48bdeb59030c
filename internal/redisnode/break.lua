-- Break a lock whoever holds it: delete it, keep the fencing counter (so the
-- next token is higher), and publish the release as release.lua does.
-- KEYS[1] lock, KEYS[2] fencing counter, KEYS[3] waiters flag (one hash tag)
-- ARGV[1] release channel, ARGV[2] the breaking Locker's id (16 bytes)
-- Returns what inspect.lua returns, read before the delete; the owner is ""
-- when nothing was held (and nothing was changed).
local owner = redis.call('GET', KEYS[1]) or ''
if owner == MODE_MARK then
	owner = '' -- not a lock's: the mark of another mode stays (modes.lua)
end
local info = {owner, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '0', redis.call('EXISTS', KEYS[3])}
if owner ~= '' then
	redis.call('DEL', KEYS[1])
	redis.call('PUBLISH', ARGV[1], ARGV[2] .. KEYS[1])
end
return info
