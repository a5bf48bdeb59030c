package lock

import "time"

// DriftMargin is how much earlier than the server's expiry the holder of a
// lease of ttl gives up on it: 1% of ttl plus 2 ms. Clocks run at slightly
// different rates, so a lease the server counts as ttl long may end, by the
// holder's clock, a little before ttl has passed since the request was sent;
// the margin keeps the holder's local deadline before the server's expiry, so
// it learns it has lost the lock (Lease.Done) before anyone else can take it.
// Backends that judge a lease's validity themselves (etcd leases, Redlock
// quorums) use the same margin, so a lease they grant is not already past
// the Manager's local deadline.
func DriftMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}
