-- Delete a message id's record for an operator; a claim in progress only
-- when forced.
-- KEYS[1] the record; ARGV[1] '1' to delete a claim in progress too.
-- Returns {0} when there is none, {1} deleted, {2, pttl} a claim in
-- progress, left as it is.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
if v ~= '=' and ARGV[1] ~= '1' then
  return {2, redis.call('PTTL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
return {1}
