package redislock

import "github.com/latchkey-go/latchkey/lock"

var (
	_ lock.Backend         = (*Node)(nil)
	_ lock.BatchRenewer    = (*Node)(nil)
	_ lock.ReleaseWatcher  = (*Node)(nil)
	_ lock.HandoffReleaser = (*Node)(nil)
)

// A Node is the lock.Backend a Locker runs on, for one Redis server or
// Cluster: it exists so that a backend spreading each lock over several
// independent servers (lock/redlock) can run this package's scripts, key
// layout, batching and pub/sub wake-ups on each of them. Programs want New.
//
// A Node implements lock.Backend, lock.BatchRenewer, lock.ReleaseWatcher and
// lock.HandoffReleaser with the meanings documented there; its fencing tokens and keys are those
// of the package doc. Close stops its pub/sub subscription.
type Node struct{ *backend }

// NewNode returns a Node on client with the options New takes. It returns an
// error wrapping lock.ErrInvalid for a nil client or a bad option and touches
// no server.
func NewNode(client Client, opts ...Option) (*Node, error) {
	b, err := build(client, opts)
	if err != nil {
		return nil, err
	}
	return &Node{b}, nil
}

// Keys returns the Redis keys of key's lock (holding the owner) and of its
// fencing counter (holding the last token, in decimal), which share one hash
// tag.
func (n *Node) Keys(key string) (lock, fence string) {
	lk := lockKey(n.prefix, key)
	return lk, lk + ":fence"
}

// Close stops the Node's pub/sub subscription and waits for its goroutine.
// It is safe to call more than once.
func (n *Node) Close() error {
	n.close()
	return nil
}
