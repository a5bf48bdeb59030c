-- next_token issues the next fencing token of the counter at key counter and
-- keeps the counter for retention ms from now: max(last + 1, the server's
-- time in microseconds). Every script that issues a token starts with this
-- file (see withToken), so one rule covers locks, hand-overs, read-write
-- locks and semaphores.
--
-- While the counter lives the token rises by at least one per issue,
-- whatever the clock does. A counter that is missing (first use, expiry,
-- eviction, a restart without persistence) or stale (a failover to a replica
-- that missed the last issues) is overtaken by the clock: a name's tokens
-- follow the clock of the server that issued them, at most a few
-- microseconds ahead of it, so a promoted replica's next token is above
-- every token the old master issued unless the replica's clock is behind the
-- old master's by more than the time the failover took.
--
-- The common case is two commands: TIME, and one SET that stores the clock
-- and answers the last token (SET ... GET, Redis 6.2 and later); only a
-- second issue within one microsecond of the clock (or after the clock went
-- back) writes again.
local function next_token(counter, retention)
	local t = redis.call('TIME')
	local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
	local last = tonumber(redis.call('SET', counter, string.format('%d', token), 'PX', retention, 'GET'))
	if last and last >= token then
		token = last + 1
		redis.call('SET', counter, string.format('%d', token), 'PX', retention)
	end
	return token
end

