package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

// key is the lock key the Manager, and so its Observer, knows r by:
// "permits/count/name", "4/1/payments" for one of 4 permits.
func key(r Request) string {
	return strconv.Itoa(r.Permits) + "/" + strconv.Itoa(r.Count) + "/" + r.Name
}

// parseKey reads back a key made by key. It returns an error wrapping
// lock.ErrInvalid for anything key cannot make from a valid Request.
func parseKey(k string) (Request, error) {
	ns, rest, ok1 := strings.Cut(k, "/")
	ks, name, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return Request{}, fmt.Errorf("%w: semaphore: %q is not a semaphore key", lock.ErrInvalid, k)
	}
	n, err1 := strconv.Atoi(ns)
	c, err2 := strconv.Atoi(ks)
	if err1 != nil || err2 != nil || strconv.Itoa(n) != ns || strconv.Itoa(c) != ks {
		return Request{}, fmt.Errorf("%w: semaphore: %q is not a semaphore key", lock.ErrInvalid, k)
	}
	r := Request{Name: name, Permits: n, Count: c}
	return r, r.check()
}

// A view is a Backend as the driver.Backend a lock.Manager takes, for the
// keys key makes. Every view is a driver.Shared (a name of N > 1 permits has
// several holders) and has the capabilities whose absence the Manager
// makes up for in the same way whatever the backend: without the
// Backend's ReleaseWatcher its WatchRelease fails and the Manager polls,
// without its PipelinedReleaser ReleaseHandoff releases and then hands off,
// and without Bounded a permit is certain for its whole TTL. A ServerQueue
// or a BatchRenewer changes how the Manager queues and renews, so the view
// of one is a queuedView or batchView, which has it, and no other view does.
type view struct {
	b       Backend
	watcher ReleaseWatcher    // b's, or nil
	handoff PipelinedReleaser // b's, or nil
	bounded Bounded           // b's, or nil
	batch   BatchRenewer      // b's, or nil
	queue   ServerQueue       // b's, or nil
}

var (
	_ driver.Backend           = (*view)(nil)
	_ driver.Shared            = (*view)(nil)
	_ driver.ReleaseWatcher    = (*view)(nil)
	_ driver.PipelinedReleaser = (*view)(nil)
	_ driver.BoundedAcquirer   = (*view)(nil)
	_ driver.BoundedRenewer    = (*view)(nil)
	_ driver.BatchRenewer      = batchView{}
	_ driver.ServerQueue       = queuedView{}
	_ driver.BatchRenewer      = queuedBatchView{}
	_ driver.ServerQueue       = queuedBatchView{}
)

// The views of a BatchRenewer, a ServerQueue, and a backend that is both.
type (
	batchView       struct{ *view }
	queuedView      struct{ *view }
	queuedBatchView struct{ queuedView }
)

// newView returns b's view, with the optional capabilities b has.
func newView(b Backend) driver.Backend {
	v := &view{b: b}
	v.watcher, _ = b.(ReleaseWatcher)
	v.handoff, _ = b.(PipelinedReleaser)
	v.bounded, _ = b.(Bounded)
	v.batch, _ = b.(BatchRenewer)
	v.queue, _ = b.(ServerQueue)
	switch {
	case v.queue != nil && v.batch != nil:
		return queuedBatchView{queuedView{v}}
	case v.queue != nil:
		return queuedView{v}
	case v.batch != nil:
		return batchView{v}
	}
	return v
}

func (v *view) TryAcquire(ctx context.Context, k, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	r, err := parseKey(k)
	if err != nil {
		return 0, 0, err
	}
	return v.b.TryAcquire(ctx, r, owner, ttl)
}

func (v *view) Renew(ctx context.Context, k, owner string, ttl time.Duration) error {
	r, err := parseKey(k)
	if err != nil {
		return err
	}
	return v.b.Renew(ctx, r, owner, ttl)
}

func (v *view) Release(ctx context.Context, k, owner string) error {
	r, err := parseKey(k)
	if err != nil {
		return err
	}
	return v.b.Release(ctx, r, owner)
}

func (v *view) Shared(k string) bool {
	r, err := parseKey(k)
	return err == nil && r.Permits > 1
}

func (v *view) WatchRelease(ctx context.Context, k string) (<-chan struct{}, func(), error) {
	if v.watcher == nil {
		return nil, nil, fmt.Errorf("%w: semaphore: the backend gives no release hints", lock.ErrUnsupported)
	}
	r, err := parseKey(k)
	if err != nil {
		return nil, nil, err
	}
	return v.watcher.WatchRelease(ctx, r.Name)
}

func (v *view) ReleaseHandoff(ctx context.Context, k, owner string, handoff func()) error {
	r, err := parseKey(k)
	if err != nil || v.handoff == nil {
		if err == nil {
			err = v.b.Release(ctx, r, owner)
		}
		handoff()
		return err
	}
	return v.handoff.ReleaseHandoff(ctx, r, owner, handoff)
}

// certain is how long from sent a permit of ttl that a call sent then
// confirmed is certainly held.
func (v *view) certain(sent time.Time, ttl time.Duration) time.Duration {
	if v.bounded == nil {
		return ttl
	}
	return v.bounded.Certain(sent, ttl)
}

func (v *view) TryAcquirePartial(ctx context.Context, k, owner string, ttl time.Duration) (uint64, time.Duration, time.Duration, error) {
	sent := time.Now()
	token, left, err := v.TryAcquire(ctx, k, owner, ttl)
	if err != nil {
		return 0, 0, left, err
	}
	return token, v.certain(sent, ttl), left, nil
}

func (v *view) RenewPartial(ctx context.Context, k, owner string, ttl time.Duration) (time.Duration, error) {
	sent := time.Now()
	if err := v.Renew(ctx, k, owner, ttl); err != nil {
		return 0, err
	}
	return v.certain(sent, ttl), nil
}

func (v batchView) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	return v.renewBatch(ctx, batch)
}

func (v queuedBatchView) RenewBatch(ctx context.Context, batch []driver.Renewal) []error {
	return v.renewBatch(ctx, batch)
}

var errTooFewRenewals = errors.New("semaphore: backend returned too few renewal results")

// renewBatch passes the renewals of batch to the backend, and returns one
// error per renewal: a key that is not a semaphore's gets its parse error
// and never reaches the backend.
func (v *view) renewBatch(ctx context.Context, batch []driver.Renewal) []error {
	errs := make([]error, len(batch))
	rs := make([]Renewal, 0, len(batch))
	at := make([]int, 0, len(batch)) // rs[j] is batch[at[j]]
	for i, d := range batch {
		r, err := parseKey(d.Key)
		if err != nil {
			errs[i] = err
			continue
		}
		rs = append(rs, Renewal{Request: r, Owner: d.Owner, TTL: d.TTL})
		at = append(at, i)
	}
	got := v.batch.RenewBatch(ctx, rs)
	for j, i := range at {
		errs[i] = errTooFewRenewals
		if j < len(got) {
			errs[i] = got[j]
		}
	}
	return errs
}

// WatchReleaseOwner implements driver.ServerQueue.
func (v queuedView) WatchReleaseOwner(ctx context.Context, k, owner string) (<-chan struct{}, func(), error) {
	r, err := parseKey(k)
	if err != nil {
		return nil, nil, err
	}
	return v.queue.WatchReleaseOwner(ctx, r, owner)
}
