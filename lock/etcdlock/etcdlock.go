package etcdlock

import (
	"context"
	"fmt"
	"reflect"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latchkey-go/latchkey/lock"
)

// Client is what a Locker needs from an etcd client: the seven calls it
// makes, with the meaning clientv3 gives them. *clientv3.Client satisfies it.
// When the Client also has ActiveConnection (a *clientv3.Client, or a type
// that embeds one), the Locker sends its lease keep-alives on long-lived
// streams of that connection rather than through the Client's KeepAliveOnce.
type Client interface {
	// Txn puts a contender's key unless it exists, and reads the head.
	Txn(ctx context.Context) clientv3.Txn
	// Get reads a queue's head, a predecessor, and a held key at renewal.
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	// Delete deletes a contender's key at release or withdrawal.
	Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error)
	// Grant grants a contender's lease.
	Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error)
	// KeepAliveOnce renews a lease, when the Client has no ActiveConnection.
	KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
	// Revoke revokes a lease no key needs any more.
	Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error)
	// Watch watches a waiting contender's predecessor.
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
}

var _ Client = (*clientv3.Client)(nil)

// A Locker is a lock.Locker on one etcd cluster. Its methods are safe for
// concurrent use. It starts goroutines only for Acquire calls that wait
// (stopped when they return), for renewal while leases are held, and one per
// open keep-alive stream (at most four, until Close). It keeps
// the etcd leases of released locks, which hold no key, for its next locks;
// Close revokes them (without Close they expire on the server after their
// TTL). It never closes the client.
type Locker struct {
	*lock.Manager
	b *backend
}

var _ lock.Locker = (*Locker)(nil)

// An Option configures New.
type Option func(*options)

type options struct {
	prefix string
}

// configure applies opts, after refusing a nil c with an error wrapping
// lock.ErrInvalid.
func configure(c Client, opts []Option) (options, error) {
	var o options
	if c == nil || (reflect.ValueOf(c).Kind() == reflect.Pointer && reflect.ValueOf(c).IsNil()) {
		return o, fmt.Errorf("%w: etcdlock: nil client", lock.ErrInvalid)
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, nil
}

// WithPrefix puts every lock under prefix: lock key k becomes the etcd
// prefix prefix+k+"/", under which each contender writes
// prefix+k+"/<lease ID in hex>". Default: "" (no prefix), which is what
// concurrency.NewMutex(session, k+"/") and `etcdctl lock k` use, so all three
// exclude each other on the same name. Use the same prefix on every client
// that shares a lock.
func WithPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// New returns a Locker that keeps its locks in the etcd cluster c talks to.
// It returns an error wrapping lock.ErrInvalid for a nil client and touches
// no server until the first Acquire.
func New(c Client, opts ...Option) (*Locker, error) {
	o, err := configure(c, opts)
	if err != nil {
		return nil, err
	}
	b := newBackend(c, o)
	m, err := lock.NewManager(b)
	if err != nil {
		return nil, err
	}
	return &Locker{Manager: m, b: b}, nil
}

// Close revokes the idle etcd leases the Locker kept for reuse (they hold no
// key; those that may have expired already are left alone), within 5 s, makes later releases revoke their lease instead of
// keeping it, and closes the keep-alive streams (later keep-alives open a
// stream each). It does not release held leases, which stay renewed until
// released or lost, and the Locker stays usable. It returns the first
// revocation error other than a lease already gone; the leases it could not
// revoke expire on the server after their TTL. It is safe to call more than
// once.
func (l *Locker) Close() error {
	return l.b.close()
}
