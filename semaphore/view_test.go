package semaphore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
)

type plainBackend struct{}

func (plainBackend) TryAcquire(context.Context, Request, string, time.Duration) (uint64, time.Duration, error) {
	return 1, 0, nil
}
func (plainBackend) Renew(context.Context, Request, string, time.Duration) error { return nil }
func (plainBackend) Release(context.Context, Request, string) error              { return nil }

// batchBackend answers a batch with answers, and keeps the batch it was
// given.
type batchBackend struct {
	plainBackend
	answers []error
	got     []Renewal
}

func (b *batchBackend) RenewBatch(_ context.Context, batch []Renewal) []error {
	b.got = batch
	return b.answers
}

// queueing makes a backend a ServerQueue.
type queueing struct{}

func (queueing) WatchReleaseOwner(context.Context, Request, string) (<-chan struct{}, func(), error) {
	return nil, func() {}, nil
}

type queueBackend struct {
	plainBackend
	queueing
}

type queueBatchBackend struct {
	batchBackend
	queueing
}

// TestViewHasTheCapabilitiesThatChangeTheManager checks that the Manager
// renews in batches and leaves the queue to the server exactly for the
// backends that do, and that every semaphore of more than one permit is
// shared.
func TestViewHasTheCapabilitiesThatChangeTheManager(t *testing.T) {
	for _, c := range []struct {
		name         string
		b            Backend
		batch, queue bool
	}{
		{"plain", plainBackend{}, false, false},
		{"batch", &batchBackend{}, true, false},
		{"queue", queueBackend{}, false, true},
		{"queue and batch", &queueBatchBackend{}, true, true},
	} {
		v := newView(c.b)
		_, batch := v.(driver.BatchRenewer)
		_, queue := v.(driver.ServerQueue)
		if batch != c.batch || queue != c.queue {
			t.Errorf("%s: the view renews in batches %v, queues on the server %v; want %v, %v", c.name, batch, queue, c.batch, c.queue)
		}
		s, ok := v.(driver.Shared)
		if !ok || !s.Shared("2/1/n") || s.Shared("1/1/n") || s.Shared("n") {
			t.Errorf("%s: the view does not share exactly the names of several permits", c.name)
		}
	}
}

// TestViewRenewBatchAnswersEachRenewal checks that a batch reaches the
// backend as Requests, in order, and that a renewal the backend gave no
// answer for is not taken as renewed.
func TestViewRenewBatchAnswersEachRenewal(t *testing.T) {
	b := &batchBackend{answers: []error{nil}}
	errs := newView(b).(driver.BatchRenewer).RenewBatch(context.Background(), []driver.Renewal{
		{Key: "2/1/a", Owner: "o1", TTL: time.Second},
		{Key: "not a semaphore's", Owner: "o2", TTL: time.Second},
		{Key: "3/2/b/c", Owner: "o3", TTL: 2 * time.Second},
	})
	want := []Renewal{{Request{"a", 2, 1}, "o1", time.Second}, {Request{"b/c", 3, 2}, "o3", 2 * time.Second}}
	if len(b.got) != 2 || b.got[0] != want[0] || b.got[1] != want[1] {
		t.Errorf("the backend was asked to renew %+v, want %+v", b.got, want)
	}
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], lock.ErrInvalid) || errs[2] == nil {
		t.Errorf("RenewBatch = %v, want nil, an invalid key, and an error for the renewal left unanswered", errs)
	}
}
