package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/internal/waitq"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

var (
	_ driver.Relabeler     = (*backend)(nil)
	_ driver.HolderWatcher = (*backend)(nil)
)

// Relabel implements driver.Relabeler: a version-checked SetData of our own
// node puts the new label as its data, where Curator's LeaderSelector and
// kazoo's Election read a participant's id. The node, its czxid (the fencing
// token) and its place in the queue stay.
func (b *backend) Relabel(ctx context.Context, key, owner, newOwner string) error {
	c := b.owners.Get(owner)
	if c == nil {
		return lockerr.NotHeld("zklock: no node for this owner")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held || c.node == "" {
		return lockerr.NotHeld("zklock: not held")
	}
	_, label, _ := lock.ParseOwner(newOwner)
	st, err := call(ctx, b, func() (*zk.Stat, error) {
		return b.conn.Set(c.node, []byte(label), c.version)
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		node := c.node
		c.held, c.node = false, ""
		b.owners.Forget(owner, c)
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s is gone (session expired or deleted)", node))
	case errors.Is(err, zk.ErrBadVersion):
		return lockerr.NotHeld(fmt.Sprintf("zklock: node %s was changed by another client", c.node))
	case err != nil:
		// The change may have been made: the version we know may be
		// stale, so the release deletes our node whatever its version
		// (its name is ours alone).
		c.version = -1
		return err
	}
	c.version, c.label = st.Version, []byte(label)
	if !b.owners.Rename(owner, newOwner, c) {
		return lockerr.NotHeld("zklock: released meanwhile")
	}
	return nil
}

// WatchHolder implements driver.HolderWatcher: a children watch of the lock's
// znode (an exists watch while it does not exist) and a data watch of the
// head contender's node, set again after each event, and a signal once
// they are set again; a lost session fires every watch, and they are set
// again on the next session.
func (b *backend) WatchHolder(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	dir, err := b.dir(key)
	if err != nil {
		return nil, nil, err
	}
	hw := &holderWatch{b: b, dir: dir, out: waitq.NewWake()}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hw.run(ctx, ready)
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return hw.out, func() { cancel(); <-done }, nil
}

// A holderWatch follows the head of one election's queue: the queue's
// children watch and the head's data watch, each kept while unfired.
type holderWatch struct {
	b      *backend
	dir    string
	out    waitq.Wake // signalled once the watches are set again after a change
	head   string
	dirEv  <-chan zk.Event // the queue's watch, while unfired
	headEv <-chan zk.Event // the head's data watch, while unfired
}

// run sets the watches, closes ready once they are first set, and signals
// out each time they are set again after one fired, until ctx ends.
func (hw *holderWatch) run(ctx context.Context, ready chan struct{}) {
	first := true
	for ctx.Err() == nil {
		err := hw.rearm(ctx)
		// Signal only now that the watches are set again: the read the
		// signal causes sees at least what they were set on, and any
		// later change fires them. (A signal sent on the event itself
		// could be read before a change that the new watches then no
		// longer see.)
		if first {
			close(ready)
			first = false
		} else {
			hw.out.Signal()
		}
		if err != nil {
			// No session, or the head went meanwhile: list the queue
			// again soon, with new watches.
			hw.dirEv, hw.headEv, hw.head = nil, nil, ""
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-hw.dirEv:
			hw.dirEv = nil
		case <-hw.headEv:
			hw.headEv = nil
		}
	}
}

// rearm sets the watches that fired. An unfired watch stays set: the
// queue, and so the head, did not change; setting another would pile up
// watchers.
func (hw *holderWatch) rearm(ctx context.Context) error {
	var err error
	h := hw.head
	if hw.dirEv == nil {
		hw.dirEv, h, err = hw.b.watchQueue(ctx, hw.dir)
	}
	if err != nil || (h == hw.head && hw.headEv != nil) {
		return err
	}
	hw.headEv = nil
	if h != "" {
		hw.headEv, err = hw.b.watchData(ctx, hw.dir+"/"+h)
	}
	hw.head = h
	return err
}

// watchQueue sets a children watch on dir (an exists watch if it does not
// exist) and returns it and the head contender's name, "" if none.
func (b *backend) watchQueue(ctx context.Context, dir string) (<-chan zk.Event, string, error) {
	type result struct {
		ev       <-chan zk.Event
		children []string
	}
	r, err := call(ctx, b, func() (result, error) {
		children, _, ev, err := b.conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ev, err = b.conn.ExistsW(dir)
			if err == nil && ok {
				// Created meanwhile: the exists watch fires on its
				// deletion only; read again at once.
				return result{}, errors.New("zklock: lock node created while watched")
			}
		}
		return result{ev, children}, err
	})
	if err != nil {
		return nil, "", err
	}
	head := ""
	var best int64 = -1
	for _, ch := range r.children {
		if s, ok := sequence(ch); ok && (best < 0 || s < best) {
			best, head = s, ch
		}
	}
	return r.ev, head, nil
}

// watchData sets a data watch on node.
func (b *backend) watchData(ctx context.Context, node string) (<-chan zk.Event, error) {
	return call(ctx, b, func() (<-chan zk.Event, error) {
		_, _, ev, err := b.conn.GetW(node)
		return ev, err
	})
}
