-- Read a semaphore as an operator sees it, in one step, changing nothing.
-- KEYS[1] lease ends, KEYS[2] holders, KEYS[3] fencing counter, KEYS[4]
-- waiters flag (one hash tag)
-- Returns {N or 0, last token or "0", 1 if the waiters flag is set else 0,
-- then for each live holder, earliest lease end first: owner, ms left,
-- "count token taken-at-ms"}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {0, redis.call('GET', KEYS[3]) or '0', redis.call('EXISTS', KEYS[4])}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
if #live > 0 then
	out[1] = tonumber(redis.call('HGET', KEYS[2], 'n') or '0')
end
for i = 1, #live, 2 do
	table.insert(out, live[i])
	table.insert(out, tonumber(live[i + 1]) - now)
	table.insert(out, redis.call('HGET', KEYS[2], live[i]) or '')
end
return out
