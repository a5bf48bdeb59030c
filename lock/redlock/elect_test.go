package redlock

import (
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/lock"
)

// TestElection runs the election suite on five private servers: Proclaim
// stands when a quorum of them replaced the owner. Inspection shows the
// quorum's view of the token, which a competing attempt can raise on some
// servers while the lock changes hands. Terms of 2 s give each server call
// 200 ms (a tenth of the TTL), which a loaded machine needs.
func TestElection(t *testing.T) {
	c := startCluster(t)
	electtest.Run(t, electtest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, _ := c.lockerAndClients(t)
			return l
		},
		TokenApprox: true,
		TTL:         2 * time.Second,
	})
}
