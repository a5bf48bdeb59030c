-- Read a read-write lock as an operator sees it, in one step.
-- KEYS as rw_acquire.lua's.
-- Returns {writer owner or "", writer's token or "0", writer's PTTL,
-- last token or "0", live intents, then member ("<token> <owner>") and ms
-- left for each live reader}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {
	redis.call('GET', KEYS[1]) or '',
	redis.call('GET', KEYS[2]) or '0',
	redis.call('PTTL', KEYS[1]),
	redis.call('GET', KEYS[5]) or '0',
	redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'),
}
local r = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #r, 2 do
	out[#out + 1] = r[i]
	out[#out + 1] = tonumber(r[i + 1]) - now
end
return out
