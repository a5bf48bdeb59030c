-- Delete a record for an operator; a claim in progress only when forced.
-- KEYS[1] the record (a string, or a hash of earlier versions);
-- ARGV[1] '1' to delete a claim in progress too.
-- Returns {0} when there is none, {1} when it was deleted, or {2, pttl}
-- for a claim in progress that was left as it is.
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then
  return {0}
end
local running
if t == 'hash' then
  running = redis.call('HGET', KEYS[1], 's') == 'p'
else
  running = string.sub(redis.call('GET', KEYS[1]), 1, 1) == 'p'
end
if running and ARGV[1] ~= '1' then
  return {2, redis.call('PTTL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
return {1}
