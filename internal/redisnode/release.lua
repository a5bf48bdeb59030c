-- Delete the lock if it is still ours (compare-and-delete) and, when someone
-- has been waiting for it lately, publish the release.
-- KEYS[1] lock, KEYS[2] waiters flag (one hash tag); ARGV[1] owner,
-- ARGV[2] release channel, ARGV[3] the releasing Locker's id (16 bytes), which
-- prefixes the message so that Locker can skip its own releases.
-- Returns 1 if deleted, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	if redis.call('EXISTS', KEYS[2]) == 1 then
		redis.call('PUBLISH', ARGV[2], ARGV[3] .. KEYS[1])
	end
	return 1
end
return 0
