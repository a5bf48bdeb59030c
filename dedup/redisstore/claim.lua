-- Claim a message id in one step, for ClaimBatch on servers that refuse
-- SET NX GET (before Redis 7.0).
-- KEYS[1]  the id's record, a string: the owner's token while processing,
--          '=' once done (tokens are hex, so they never equal it).
-- ARGV[1]  new owner token
-- ARGV[2]  processing TTL, milliseconds
-- Returns {1} claimed, {2, pttl} in progress, {3} done. An expired claim or
-- done record is gone (PX, Redis's clock), so it is claimed anew.
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
if v == '=' then
  return {3}
end
return {2, redis.call('PTTL', KEYS[1])}
