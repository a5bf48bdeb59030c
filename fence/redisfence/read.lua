-- A fenced read: raises the key's token to the reader's, unless it is
-- higher, and returns the key's value, all in one step, so no write with a
-- lower token is applied after the read.
-- KEYS[1]: the data key. KEYS[2]: its token key, in the same hash slot.
-- ARGV[1]: the reader's token, decimal without leading zeros.
-- ARGV[2]: GET, HGETALL or HMGET. ARGV[3..]: HMGET's fields.
-- Returns {1, token, exists, value} when claimed (value: GET's string,
-- HGETALL's or HMGET's array), {0, highest} when refused. The value is read
-- before the token is raised, so a wrong type changes nothing.
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
local exists = redis.call('EXISTS', KEYS[1])
local value
if op == 'GET' then
	value = redis.call('GET', KEYS[1])
elseif op == 'HGETALL' then
	value = redis.call('HGETALL', KEYS[1])
elseif op == 'HMGET' then
	value = redis.call('HMGET', KEYS[1], unpack(ARGV, 3))
else
	return redis.error_reply('redisfence: unknown operation ' .. op)
end
redis.call('SET', KEYS[2], t)
return {1, t, exists, value}
