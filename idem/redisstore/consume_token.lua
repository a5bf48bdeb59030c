-- Spend a one-time token: get and delete in one step. KEYS[1] the token.
-- Returns its binding, or nil when it does not exist.
return redis.call('GETDEL', KEYS[1])
