-- Check, add, claim, mark done or release message ids in a Bloom filter of
-- two rotating generations, in one step for one id or a batch.
--
-- KEYS[1]  state hash: g (generation number), c (ids added to the current
--          generation), t (its start, ms on Redis's clock), m, k
-- KEYS[2]  bitmap of the even generations, KEYS[3] of the odd ones
-- KEYS[4..] one claim key per id (modes claim, done, release)
-- ARGV[1]  mode: test | add | claim | done | release | stats
-- ARGV[2]  m (bits per generation), ARGV[3] k (hashes), ARGV[4] capacity
--          per generation, ARGV[5] period in ms, ARGV[6] claim TTL in ms
-- ARGV[7]  number of ids; then, per id, its token (or '') and its k bit
--          positions, computed by the client: ids never reach the script.
--
-- Per id the reply holds two integers:
--   test, add:     {0|1 seen, 0}
--   claim:         {1, 0} claimed, {2, pttl} in progress, {3, 0} seen (done)
--   done, release: {1|0 token owned the claim, 0}
-- stats replies {exists, g, c, t, now, bits set current, bits set previous,
-- current live, previous live}.
local mode = ARGV[1]
local m, k = tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, period, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local n = tonumber(ARGV[7])
local writes = mode ~= 'test' and mode ~= 'stats'

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)

-- A new generation's bitmap is written at its full size at once: grown by
-- SETBIT, Redis would over-allocate it up to twice (sds growth is greedy
-- below 1 MiB). Beyond 8 MiB a last bit grows it (at most 1 MiB spare)
-- without building the string in Lua. It expires when it leaves the
-- window, two periods on.
local bytes = math.ceil(m / 8)
local function fresh(key)
  if bytes <= 8388608 then
    redis.call('SET', key, string.rep('\0', bytes), 'PXAT', now + 2 * period)
  else
    redis.call('DEL', key)
    redis.call('SETBIT', key, m - 1, 0)
    redis.call('PEXPIREAT', key, now + 2 * period)
  end
end

local st = redis.call('HMGET', KEYS[1], 'g', 'c', 't', 'm', 'k')
local gen, count, start = 0, 0, now
local exists = st[1] ~= false
local curLive, prevLive = false, false
local rotated, added = false, false

if exists then
  if tonumber(st[4]) ~= m or tonumber(st[5]) ~= k then
    return redis.error_reply('ERR bloomfilter: filter was created with m=' .. st[4] .. ' k=' .. st[5] ..
      ', this client has m=' .. ARGV[2] .. ' k=' .. ARGV[3])
  end
  gen, count, start = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  local age = now - start
  curLive = age < 2 * period
  prevLive = age < period
  if writes and age >= period then
    -- The current generation's period is over: it becomes the previous
    -- one (or, past two periods, goes too) and an empty one starts.
    if age >= 2 * period then
      redis.call('DEL', KEYS[2 + gen % 2])
    end
    gen, count, start = gen + 1, 0, now
    fresh(KEYS[2 + gen % 2])
    prevLive, curLive = curLive, true
    rotated = true
  end
elseif writes then
  -- No state: bitmaps left without it are stale (they expire with it).
  redis.call('DEL', KEYS[3])
  fresh(KEYS[2])
  curLive, rotated = true, true
end

if mode == 'stats' then
  local cur = redis.call('BITCOUNT', KEYS[2 + gen % 2])
  local prev = redis.call('BITCOUNT', KEYS[2 + (gen + 1) % 2])
  return {exists and 1 or 0, gen, count, start, now, cur, prev, curLive and 1 or 0, prevLive and 1 or 0}
end

local function has(key, base)
  for j = 1, k do
    if redis.call('GETBIT', key, ARGV[base + j]) == 0 then
      return false
    end
  end
  return true
end

local function seen(base)
  return (curLive and has(KEYS[2 + gen % 2], base)) or (prevLive and has(KEYS[2 + (gen + 1) % 2], base))
end

local function add(base)
  if count >= cap then
    -- Full: the current generation becomes the previous one; the one
    -- before it is dropped.
    gen, count, start = gen + 1, 0, now
    fresh(KEYS[2 + gen % 2])
    prevLive, rotated = true, true
  end
  local key = KEYS[2 + gen % 2]
  for j = 1, k do
    redis.call('SETBIT', key, ARGV[base + j], 1)
  end
  count = count + 1
  added = true
end

local out = {}
for i = 0, n - 1 do
  local base = 8 + i * (k + 1)
  local token = ARGV[base]
  local r, extra = 0, 0
  if mode == 'test' then
    if seen(base) then r = 1 end
  elseif mode == 'add' then
    if seen(base) then r = 1 else add(base) end
  elseif mode == 'claim' then
    if seen(base) then
      r = 3
    elseif redis.call('SET', KEYS[4 + i], token, 'NX', 'PX', ttl) then
      r = 1
    else
      r, extra = 2, redis.call('PTTL', KEYS[4 + i])
    end
  elseif mode == 'done' then
    if redis.call('GET', KEYS[4 + i]) == token then
      if not seen(base) then add(base) end
      redis.call('DEL', KEYS[4 + i])
      r = 1
    end
  elseif mode == 'release' then
    if redis.call('GET', KEYS[4 + i]) == token then
      redis.call('DEL', KEYS[4 + i])
      r = 1
    end
  else
    return redis.error_reply('ERR bloomfilter: unknown mode ' .. mode)
  end
  out[#out + 1] = r
  out[#out + 1] = extra
end

if rotated then
  redis.call('HSET', KEYS[1], 'g', gen, 'c', count, 't', start, 'm', m, 'k', k)
  redis.call('PEXPIREAT', KEYS[1], start + 2 * period)
elseif added then
  redis.call('HSET', KEYS[1], 'c', count)
end
return out
