-- Read a message id's record for an operator, without changing it.
-- KEYS[1] the record: the owner's token while processing, '=' once done.
-- Returns {0} when there is none, {2, pttl} in progress, {3, pttl} done.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
if v == '=' then
  return {3, redis.call('PTTL', KEYS[1])}
end
return {2, redis.call('PTTL', KEYS[1])}
