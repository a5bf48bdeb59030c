package redisnode

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	//go:embed relabel.lua
	relabelLua    string
	relabelScript = redis.NewScript(relabelLua)
)

var _ driver.Relabeler = (*Node)(nil)

// Relabel implements driver.Relabeler: one script replaces the owner if it is
// still ours, keeping the lock's expiry, and publishes the change on the
// release channel, which watchers of the key (an election's observers)
// hear; waiters woken by it find the lock held and wait on.
func (b *Node) Relabel(ctx context.Context, key, owner, newOwner string) error {
	n, err := b.exec.Run(ctx, nil, relabelScript, []string{LockKey(b.prefix, key)}, owner, newOwner, b.channel, anonymous).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}
