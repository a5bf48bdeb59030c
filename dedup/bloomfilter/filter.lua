-- Check, add, claim, mark done or release message ids in a Bloom filter of
-- two rotating generations, in one step for one id or a batch; rotate the
-- generations; read the filter's state. TestAndAdd and Test take this
-- script only near a rotation: otherwise they are a transaction of plain
-- commands on the same keys (filter.go, fast.go).
--
-- KEYS[1]  state hash: g (rotations so far), t (the current generation's
--          start, ms on Redis's clock), m ('v2:' .. bits per generation), k,
--          and 'c:' .. g, the ids added to generation g
-- KEYS[2]  the current generation's bitmap; KEYS[3] the previous one's. A
--          rotation renames the current one to the previous one.
-- KEYS[4], KEYS[5]  the generations of the first release's layout (bits:0
--          and bits:1 by generation parity), taken over once if found
-- KEYS[6..] one claim key per id (modes claim, done, release)
-- ARGV[1]  mode: test | add | claim | done | release | stats
-- ARGV[2]  m (bits per generation), ARGV[3] k (hashes), ARGV[4] capacity
--          per generation, ARGV[5] period in ms, ARGV[6] claim TTL in ms
-- ARGV[7]  number of ids; ARGV[8], ARGV[9] a generation and the ids the
--          client added to it by plain commands and has not counted yet
--          (counted only if it is still the current one); then, per id,
--          its token (or '') and its k bit positions, computed by the
--          client: ids never reach Redis.
--
-- Per id the reply holds two integers:
--   test, add:     {0|1 seen, 0}
--   claim:         {1, 0} claimed, {2, pttl} in progress, {3, 0} seen (done)
--   done, release: {1|0 token owned the claim, 0}
-- and then four more: the current generation's count, its start, now and
-- its number (-1 if the filter does not exist). stats replies {exists, g, count, t, now, bits set current,
-- bits set previous, current live, previous live}.
local mode = ARGV[1]
local m, k = tonumber(ARGV[2]), tonumber(ARGV[3])
local cap, period, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local n = tonumber(ARGV[7])
local writes = mode ~= 'test' and mode ~= 'stats'
if mode ~= 'add' and mode ~= 'test' and mode ~= 'claim' and mode ~= 'done' and mode ~= 'release' and mode ~= 'stats' then
  return redis.error_reply('ERR bloomfilter: unknown mode ' .. mode)
end
local tag = 'v2:' .. ARGV[2]
local cur, prev = KEYS[2], KEYS[3]

-- int formats an integer for a command argument.
local function int(x) return string.format('%d', x) end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)

local bytes = math.ceil(m / 8)

-- A new generation's bitmap is written at its full size at once: grown bit
-- by bit, Redis would over-allocate it up to twice (sds growth is greedy
-- below 1 MiB). Beyond 8 MiB a last bit grows it (at most 1 MiB spare)
-- without building the string in Lua. It expires when it leaves the
-- window, two periods on.
local function fresh(key)
  if bytes <= 8388608 then
    redis.call('SET', key, string.rep('\0', bytes), 'PXAT', int(now + 2 * period))
  else
    redis.call('DEL', key)
    redis.call('SETBIT', key, int(m - 1), '0')
    redis.call('PEXPIREAT', key, int(now + 2 * period))
  end
end

-- keep makes a bitmap written by plain commands while the state was
-- missing a generation of this filter: its full size, and the window's
-- expiry from now.
local function keep(key)
  if redis.call('STRLEN', key) < bytes then
    redis.call('SETRANGE', key, int(bytes - 1), '\0')
  end
  redis.call('PEXPIREAT', key, int(now + 2 * period))
end

-- adopt moves a generation of the first release's layout to its place in
-- this one, merged with what plain commands may have written there since.
local function adopt(from, to)
  if redis.call('EXISTS', from) == 0 then return end
  if redis.call('EXISTS', to) == 1 then
    local pttl = redis.call('PTTL', from)
    redis.call('BITOP', 'OR', to, to, from)
    redis.call('DEL', from)
    if pttl > 0 then redis.call('PEXPIRE', to, pttl) end
  else
    redis.call('RENAME', from, to)
  end
end

-- rotate starts an empty current generation; the current one becomes the
-- previous one if keep is true, and goes otherwise (with the previous one).
local function rotate(keepIt)
  if keepIt and redis.call('EXISTS', cur) == 1 then
    redis.call('RENAME', cur, prev)
  else
    redis.call('DEL', cur, prev)
  end
  fresh(cur)
end

local st = redis.call('HMGET', KEYS[1], 'g', 't', 'm', 'k', 'c')
local gen, start = 0, now
local exists = st[1] ~= false and st[2] ~= false and st[3] ~= false
local curLive, prevLive = false, false
local rotated = false
local count = 0 -- ids added to the current generation
local counted = false -- count was changed here and must be written back
local function countOf(g) return tonumber(redis.call('HGET', KEYS[1], 'c:' .. int(g))) or 0 end

if exists then
  if st[3] ~= tag or st[4] ~= ARGV[3] then
    if tonumber(st[3]) == m and tonumber(st[4]) == k then
      -- The first release's layout, same sizing: its generations are
      -- taken over, and its clients are refused from now on (they read m
      -- as a number).
      local g = tonumber(st[1])
      adopt(KEYS[4 + g % 2], cur)
      adopt(KEYS[4 + (g + 1) % 2], prev)
      redis.call('HDEL', KEYS[1], 'c')
      redis.call('HSET', KEYS[1], 'c:' .. st[1], st[5] or '0')
      rotated = true
    else
      local om = string.gsub(st[3], '^v2:', '')
      return redis.error_reply('ERR bloomfilter: filter was created with m=' .. om .. ' k=' .. st[4] ..
        ', this client has m=' .. ARGV[2] .. ' k=' .. ARGV[3])
    end
  end
  gen, start = tonumber(st[1]), tonumber(st[2])
  count = countOf(gen)
  if tonumber(ARGV[9]) > 0 and ARGV[8] == st[1] then
    count, counted = count + tonumber(ARGV[9]), true
  end
  local age = now - start
  curLive = age < 2 * period
  prevLive = age < period
  if writes and age >= period then
    -- The current generation's period is over: it becomes the previous
    -- one (or, past two periods, goes too) and an empty one starts.
    rotate(age < 2 * period)
    gen, start, count, counted = gen + 1, now, 0, false
    prevLive, curLive = curLive, true
    rotated = true
  end
elseif writes then
  -- No state. A bitmap found without it was written by plain commands
  -- since the state went (it expires with its generation otherwise): it
  -- is kept, so that the ids it holds are not forgotten.
  if redis.call('EXISTS', cur) == 1 then keep(cur) else fresh(cur) end
  curLive, prevLive, rotated = true, redis.call('EXISTS', prev) == 1, true
else
  curLive, prevLive = redis.call('EXISTS', cur) == 1, redis.call('EXISTS', prev) == 1
end


if mode == 'stats' then
  if counted then
    redis.call('HSET', KEYS[1], 'c:' .. int(gen), int(count))
  end
  local c = redis.call('BITCOUNT', cur)
  local p = redis.call('BITCOUNT', prev)
  return {exists and 1 or 0, gen, count, start, now, c, p, curLive and 1 or 0, prevLive and 1 or 0}
end

-- BITFIELD takes at most this many ids at once, so that its arguments
-- stay within what Lua's unpack can pass (LUAI_MAXCSTACK, 8000).
local per = math.max(1, math.floor(1800 / k))
local seen = {} -- seen[i] = 1: the id at index i (from 0) was seen

local function has(key, i)
  local base = 10 + i * (k + 1)
  for j = 1, k do
    if redis.call('GETBIT', key, ARGV[base + j]) == 0 then
      return false
    end
  end
  return true
end

-- setAll sets the bits of the ids lo..hi not already seen in the current
-- generation with one BITFIELD per at most per ids. BITFIELD replies with
-- each bit's old value, in order: an id whose bits were all set already
-- was seen (an earlier occurrence in the same batch included).
local function setAll(key, lo, hi)
  local x = lo
  while x <= hi do
    local a, na, ids = {key}, 1, {}
    while x <= hi and #ids < per do
      if not seen[x] then
        ids[#ids + 1] = x
        local base = 10 + x * (k + 1)
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
          count, counted = count + 1, true
        end
      end
    end
  end
end

local function check(lo, hi)
  for i = lo, hi do
    if (curLive and has(cur, i)) or (prevLive and has(prev, i)) then
      seen[i] = 1
    end
  end
end

-- add adds ids lo..hi, rotating whenever the current generation is full: a
-- batch is split where its generation fills up.
local function add(lo, hi)
  local i = lo
  while i <= hi do
    if count >= cap then
      rotate(true)
      gen, start, count, counted = gen + 1, now, 0, false
      prevLive, rotated = true, true
    end
    local j = math.min(hi, i + (cap - count) - 1)
    if prevLive then
      for x = i, j do
        if has(prev, x) then seen[x] = 1 end
      end
    end
    setAll(cur, i, j)
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
  local token = ARGV[10 + i * (k + 1)]
  if mode == 'add' or mode == 'test' then
    r = seen[i] or 0
  elseif mode == 'claim' then
    if seen[i] then
      r = 3
    elseif redis.call('SET', KEYS[6 + i], token, 'NX', 'PX', ttl) then
      r = 1
    else
      r, extra = 2, redis.call('PTTL', KEYS[6 + i])
    end
  elseif mode == 'done' then
    if redis.call('GET', KEYS[6 + i]) == token then
      add(i, i)
      redis.call('DEL', KEYS[6 + i])
      r = 1
    end
  elseif redis.call('GET', KEYS[6 + i]) == token then -- release
    redis.call('DEL', KEYS[6 + i])
    r = 1
  end
  out[2 * i + 1], out[2 * i + 2] = r, extra
end

if rotated then
  -- Counts of earlier generations (a client's late count included) go.
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.sub(f, 1, 2) == 'c:' and f ~= 'c:' .. int(gen) then
      redis.call('HDEL', KEYS[1], f)
    end
  end
  redis.call('HSET', KEYS[1], 'g', int(gen), 't', int(start), 'm', tag, 'k', ARGV[3], 'c:' .. int(gen), int(count))
  redis.call('PEXPIREAT', KEYS[1], int(start + 2 * period))
elseif counted then
  redis.call('HSET', KEYS[1], 'c:' .. int(gen), int(count))
end
out[#out + 1] = count
out[#out + 1] = start
out[#out + 1] = now
-- A filter without state (read, never written) has no generation: -1.
out[#out + 1] = (exists or rotated) and gen or -1
return out
