package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	_ driver.Relabeler     = (*backend)(nil)
	_ driver.HolderWatcher = (*backend)(nil)
)

// Relabel implements driver.Relabeler as etcd's Election.Proclaim does: one
// transaction puts the new label as the key's value, on the key's lease, if
// the key still has our create revision. The key, its create revision (the
// fencing token) and its place in the queue stay.
func (b *backend) Relabel(ctx context.Context, name, owner, newOwner string) error {
	c := b.owners.Get(owner)
	if c == nil {
		return lockerr.NotHeld("etcdlock: no lease for this owner")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		return lockerr.NotHeld("etcdlock: not held")
	}
	_, label, _ := lock.ParseOwner(newOwner)
	resp, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
		Then(clientv3.OpPut(c.key, label, clientv3.WithLease(c.lease))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		b.lost(ctx, c, owner)
		return lockerr.NotHeld(fmt.Sprintf("etcdlock: key %q was deleted", c.key))
	}
	c.label = label
	if !b.owners.Rename(owner, newOwner, c) {
		return lockerr.NotHeld("etcdlock: released meanwhile")
	}
	return nil
}

// WatchHolder implements driver.HolderWatcher with one watch of the name's
// queue (<prefix><name>/): every put and delete there, lease expiries
// included, signals, which covers every change of the head. If the watch
// ends (a lost leader, a compaction) it is opened again, and signals once
// it is in place, so no change goes unread.
func (b *backend) WatchHolder(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	pfx := b.prefix + name + "/"
	out := waitq.NewWake()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	created := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		for ctx.Err() == nil {
			for resp := range b.c.Watch(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify()) {
				switch {
				case resp.Created && first:
					close(created)
					first = false
				case resp.Created:
					// Watching again after the last watch ended: what
					// changed meanwhile is read now.
					out.Signal()
				case len(resp.Events) > 0 || resp.Err() != nil:
					out.Signal()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// Return once the watch is in place, so a change after it is seen.
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-created:
	case <-t.C:
	case <-ctx.Done():
	}
	return out, func() { cancel(); <-done }, nil
}
