-- A fenced write: applied only when the writer's token is at least the
-- highest token applied to the key, all in one step.
-- KEYS[1]: the data key. KEYS[2]: its token key, in the same hash slot.
-- ARGV[1]: the writer's token, decimal without leading zeros.
-- ARGV[2]: SET, HSET or DEL. ARGV[3]: SET's expiry in ms, 0 for none.
-- ARGV[4..]: SET's value, or HSET's field value pairs.
-- Returns {1, token} when applied, {0, highest} when refused.
local function valid(s)
	return s == '0' or string.match(s, '^[1-9]%d*$') ~= nil
end
-- Tokens are compared as decimal strings, never as Lua numbers (doubles),
-- so every 63-bit token compares exactly.
local function less(a, b)
	if #a ~= #b then
		return #a < #b
	end
	return a < b
end

local t = ARGV[1]
if not valid(t) then
	return redis.error_reply('redisfence: bad token ' .. t)
end
local cur = redis.call('GET', KEYS[2])
if cur then
	if not valid(cur) then
		return redis.error_reply('redisfence: token key holds ' .. cur)
	end
	if less(t, cur) then
		return {0, cur}
	end
end
local op = ARGV[2]
if op == 'SET' then
	if ARGV[3] ~= '0' then
		redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[3])
	else
		redis.call('SET', KEYS[1], ARGV[4])
	end
elseif op == 'HSET' then
	redis.call('HSET', KEYS[1], unpack(ARGV, 4))
elseif op == 'DEL' then
	redis.call('DEL', KEYS[1])
else
	return redis.error_reply('redisfence: unknown operation ' .. op)
end
redis.call('SET', KEYS[2], t)
return {1, t}
