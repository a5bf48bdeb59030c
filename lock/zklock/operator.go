package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

var (
	_ rwlock.Lister     = (*rwBackend)(nil)
	_ rwlock.Breaker    = (*rwBackend)(nil)
	_ semaphore.Lister  = (*semBackend)(nil)
	_ semaphore.Breaker = (*semBackend)(nil)
)

// children returns the children of name's node, none if it does not exist.
func (b *backend) children(ctx context.Context, name string) ([]string, error) {
	dir, err := b.dir(name)
	if err != nil {
		return nil, err
	}
	ch, err := call(ctx, b, func() ([]string, error) {
		ch, _, err := b.conn.Children(dir)
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	return ch, nil
}

// ListRW implements rwlock.Lister, as ListLocks lists: the names one level
// under prefix's node with a reader's or a writer's node among their
// children. A writer's node is kazoo's Lock's too, so a lock with
// KazooNames is listed as well (rwlock.Locker.List shows it as a writer).
func (rw *rwBackend) ListRW(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	var names []string
	next, err := rw.b.eachName(ctx, prefix, limit, cursor, func(name string) (bool, error) {
		if strings.HasSuffix(name, semLockSuffix) {
			return false, nil // a semaphore's own lock
		}
		ch, err := rw.b.children(ctx, name)
		for _, c := range ch {
			if _, ok := sequence(c); ok && (strings.Contains(c, readNode) || strings.Contains(c, writeNode)) {
				names = append(names, name)
				return true, err
			}
		}
		return false, err
	})
	return names, next, err
}

// BreakRW implements rwlock.Breaker: a version-checked delete of the
// holder's node, whoever created it. The waiters, watching the nodes
// ahead of theirs, try again; the holder's session lives on, and its
// renewal finds the node gone.
func (rw *rwBackend) BreakRW(ctx context.Context, name string, token uint64) (rwlock.Holder, bool, error) {
	h, writer, err := rwlock.HolderOf(ctx, rw, name, token)
	if err != nil {
		return h, writer, err
	}
	return h, writer, rw.b.deleteByCzxid(ctx, name, int64(token))
}

// deleteByCzxid deletes the child of name's node created in transaction
// czxid, if it is still that node.
func (b *backend) deleteByCzxid(ctx context.Context, name string, czxid int64) error {
	dir, err := b.dir(name)
	if err != nil {
		return err
	}
	ch, err := b.children(ctx, name)
	if err != nil {
		return err
	}
	for _, c := range ch {
		st, err := call(ctx, b, func() (*zk.Stat, error) {
			_, st, err := b.conn.Exists(dir + "/" + c)
			return st, err
		})
		if err != nil {
			return fmt.Errorf("zklock: %w", err)
		}
		if st == nil || st.Czxid != czxid {
			continue
		}
		err = b.deleteNode(ctx, dir+"/"+c, st.Version)
		if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
			break
		}
		if err != nil {
			return fmt.Errorf("zklock: %w", err)
		}
		return nil
	}
	return lockerr.NotHeld(fmt.Sprintf("zklock: the holder of %q with token %d left while being broken", name, czxid))
}

// ListSemaphores implements semaphore.Lister, as ListLocks lists: the
// names one level under prefix's node with a permit's node (one that is no
// contender's) among their children.
func (s *semBackend) ListSemaphores(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	var names []string
	next, err := s.b.eachName(ctx, prefix, limit, cursor, func(name string) (bool, error) {
		ch, err := s.b.children(ctx, name)
		if err == nil && len(ch) > 0 && heldAsSemaphore(name, ch) != nil {
			names = append(names, name)
			return true, nil
		}
		return false, err
	})
	return names, next, err
}

// BreakPermits implements semaphore.Breaker: the holder's permit nodes
// (id, id-2, ...; one node for a kazoo holder) are deleted in one
// multi-operation, which deletes none if one is gone. The waiter holding
// the semaphore's lock, watching the children, is admitted; the holder's
// renewal finds its first node gone.
func (s *semBackend) BreakPermits(ctx context.Context, name string, token uint64) (semaphore.HolderInfo, error) {
	info, err := s.InspectSemaphore(ctx, name)
	if err != nil {
		return semaphore.HolderInfo{}, err
	}
	dir, err := s.semDir(name)
	if err != nil {
		return semaphore.HolderInfo{}, err
	}
	for _, h := range info.Holders {
		if h.Token != token {
			continue
		}
		nodes := []string{h.Entry}
		if id, _, _ := strings.Cut(strings.TrimPrefix(h.Entry, dir+"/"), "-"); len(id) == ownerIDHexLen {
			ch, err := s.b.children(ctx, name)
			if err != nil {
				return h, err
			}
			nodes = nodes[:0]
			for _, c := range ch {
				if c == id || strings.HasPrefix(c, id+"-") {
					nodes = append(nodes, dir+"/"+c)
				}
			}
		}
		ops := make([]any, len(nodes))
		for i, n := range nodes {
			ops[i] = &zk.DeleteRequest{Path: n, Version: -1}
		}
		if _, err := call(ctx, s.b, func() ([]zk.MultiResponse, error) { return s.b.conn.Multi(ops...) }); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return h, lockerr.NotHeld(fmt.Sprintf("zklock: the holder of semaphore %q with token %d left while being broken", name, token))
			}
			return h, fmt.Errorf("zklock: %w", err)
		}
		return h, nil
	}
	return semaphore.HolderInfo{}, lockerr.NotHeld(fmt.Sprintf("zklock: no holder of semaphore %q has token %d", name, token))
}
