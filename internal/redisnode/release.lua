-- Delete the lock if it is still ours (compare-and-delete) and, when a
-- waiter of another Locker than the holder's has been waiting for it lately
-- (the flag, see acquire.lua), publish the release. Three commands when
-- nobody waits: the script call, GET, and one DEL of the lock and the
-- waiters flag, whose count says whether the flag was set.
-- KEYS[1] lock, KEYS[2] waiters flag (one hash tag); ARGV[1] owner,
-- ARGV[2] release channel, ARGV[3] the releasing Locker's id (16 bytes), which
-- prefixes the message so that Locker can skip its own releases.
-- Returns 0 if not ours, 1 if deleted unpublished, or 2 plus the number of
-- subscribers the release reached if published.
--
-- Deleting the flag loses no waiter: every Locker's longest waiter hears
-- the message and attempts again, and sets the flag anew if it fails
-- against another Locker's holder; the releasing Locker wakes its own
-- waiters itself when nothing was published. A waiter that missed the
-- message still attempts at least once a second.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	if redis.call('DEL', KEYS[1], KEYS[2]) == 2 then
		return 2 + redis.call('PUBLISH', ARGV[2], ARGV[3] .. KEYS[1])
	end
	return 1
end
return 0
