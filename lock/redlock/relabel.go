package redlock

import (
	"context"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var _ driver.Relabeler = (*backend)(nil)

// Relabel implements driver.Relabeler: the owner is replaced on every node
// at once, and the change stands when a quorum confirmed it. A node that
// missed it keeps the old owner and refuses the renewals that follow,
// which the quorum outvotes; where no quorum confirms, the lease is lost
// at its next renewal, never held twice.
func (b *backend) Relabel(ctx context.Context, key, owner, newOwner string) error {
	return b.verdict(b.each(ctx, b.nodeTimeout(lock.DefaultTTL), func(ctx context.Context, i int) error {
		return b.nodes[i].Relabel(ctx, key, owner, newOwner)
	}))
}
