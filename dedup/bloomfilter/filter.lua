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
if mode ~= 'add' and mode ~= 'test' and mode ~= 'claim' and mode ~= 'done' and mode ~= 'release' and mode ~= 'stats' then
  return redis.error_reply('ERR bloomfilter: unknown mode ' .. mode)
end

-- int formats an integer for a command argument.
local function int(x) return string.format('%d', x) end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)

-- A new generation's bitmap is written at its full size at once: grown by
-- SETBIT, Redis would over-allocate it up to twice (sds growth is greedy
-- below 1 MiB). Beyond 8 MiB a last bit grows it (at most 1 MiB spare)
-- without building the string in Lua. It expires when it leaves the
-- window, two periods on.
local function fresh(key)
  local bytes = math.ceil(m / 8)
  if bytes <= 8388608 then
    redis.call('SET', key, string.rep('\0', bytes), 'PXAT', int(now + 2 * period))
  else
    redis.call('DEL', key)
    redis.call('SETBIT', key, int(m - 1), '0')
    redis.call('PEXPIREAT', key, int(now + 2 * period))
  end
end

local st = redis.call('HMGET', KEYS[1], 'g', 'c', 't', 'm', 'k')
local gen, count, start = 0, 0, now
local exists = st[1] ~= false
local curLive, prevLive = false, false
local rotated, added = false, false

if exists then
  if (st[4] ~= ARGV[2] and tonumber(st[4]) ~= m) or (st[5] ~= ARGV[3] and tonumber(st[5]) ~= k) then
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

-- A check reads an id's bits with GETBIT, stopping at the first 0: for a
-- new id that is one or two reads per generation. An add sets the bits of
-- many ids with one BITFIELD SET u1, which returns the old bits in the
-- order given: it is the check against the current generation and the add
-- at once, and an id given twice is seen by its second occurrence. A
-- BITFIELD takes at most `per` ids, to stay within the arguments Lua
-- passes at once. Arguments are strings: Lua would format a number with
-- sprintf("%.14g") on every call.
local per = math.max(1, math.floor(1800 / k))
local seen = {} -- seen[i] = 1: the id at index i (from 0) was seen

-- has reports whether all k bits of the id at index i are set in key.
local function has(key, i)
  local base = 8 + i * (k + 1)
  for j = 1, k do
    if redis.call('GETBIT', key, ARGV[base + j]) == 0 then
      return false
    end
  end
  return true
end

-- setAll sets in key the bits of the ids at indexes lo..hi not yet seen, in
-- order; an id whose old bits were all 1 is seen, the others are added.
local function setAll(key, lo, hi)
  local x = lo
  while x <= hi do
    local a, na, ids = {key}, 1, {}
    while x <= hi and #ids < per do
      if not seen[x] then
        ids[#ids + 1] = x
        local base = 8 + x * (k + 1)
        for j = 1, k do
          a[na + 1], a[na + 2], a[na + 3], a[na + 4] = 'SET', 'u1', ARGV[base + j], '1'
          na = na + 4
        end
      end
      x = x + 1
    end
    if #ids > 0 then
      local bits = redis.call('BITFIELD', unpack(a, 1, na))
      for y = 1, #ids do
        local b, all = (y - 1) * k, true
        for j = 1, k do
          if bits[b + j] == 0 then
            all = false
            break
          end
        end
        if all then
          seen[ids[y]] = 1
        else
          count = count + 1
          added = true
        end
      end
    end
  end
end

-- check marks the ids at indexes lo..hi found in either live generation.
local function check(lo, hi)
  for i = lo, hi do
    if (curLive and has(KEYS[2 + gen % 2], i)) or (prevLive and has(KEYS[2 + (gen + 1) % 2], i)) then
      seen[i] = 1
    end
  end
end

-- add checks and adds the ids at indexes lo..hi, in order. The current
-- generation takes at most capacity - count of them at a time, so that it
-- rotates (when full: it becomes the previous one, the one before it is
-- dropped) exactly where one id at a time would have.
local function add(lo, hi)
  local i = lo
  while i <= hi do
    if count >= cap then
      gen, count, start = gen + 1, 0, now
      fresh(KEYS[2 + gen % 2])
      prevLive, rotated = true, true
    end
    local j = math.min(hi, i + (cap - count) - 1)
    if prevLive then
      local prev = KEYS[2 + (gen + 1) % 2]
      for x = i, j do
        if has(prev, x) then seen[x] = 1 end
      end
    end
    setAll(KEYS[2 + gen % 2], i, j)
    i = j + 1
  end
end

local out = {}
if mode == 'add' then
  add(0, n - 1)
elseif mode == 'test' or mode == 'claim' then
  check(0, n - 1)
end
for i = 0, n - 1 do
  local r, extra = 0, 0
  if mode == 'add' or mode == 'test' then
    r = seen[i] or 0
  elseif mode == 'claim' then
    if seen[i] then
      r = 3
    elseif redis.call('SET', KEYS[4 + i], ARGV[8 + i * (k + 1)], 'NX', 'PX', ttl) then
      r = 1
    else
      r, extra = 2, redis.call('PTTL', KEYS[4 + i])
    end
  elseif mode == 'done' then
    if redis.call('GET', KEYS[4 + i]) == ARGV[8 + i * (k + 1)] then
      add(i, i)
      redis.call('DEL', KEYS[4 + i])
      r = 1
    end
  elseif redis.call('GET', KEYS[4 + i]) == ARGV[8 + i * (k + 1)] then -- release
    redis.call('DEL', KEYS[4 + i])
    r = 1
  end
  out[2 * i + 1], out[2 * i + 2] = r, extra
end

if rotated then
  redis.call('HSET', KEYS[1], 'g', int(gen), 'c', int(count), 't', int(start), 'm', ARGV[2], 'k', ARGV[3])
  redis.call('PEXPIREAT', KEYS[1], int(start + 2 * period))
elseif added then
  redis.call('HSET', KEYS[1], 'c', int(count))
end
return out
