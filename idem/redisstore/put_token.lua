-- Store a one-time token. KEYS[1] the token; ARGV[1] binding; ARGV[2] TTL, milliseconds.
return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
