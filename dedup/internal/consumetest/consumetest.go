// Package consumetest holds the handler the tests of dedup's broker adapters
// (amqpconsumer, natsconsumer, redisconsumer) hand their consumers.
package consumetest

import (
	"context"
	"errors"
	"sync"

	"github.com/latchkey-go/latchkey/dedup"
)

// ErrFlaky is the error of a Recorder's failing runs.
var ErrFlaky = errors.New("flaky")

// Recorder is a handler that records every message it is given and fails,
// with ErrFlaky, its first Fails runs. It is safe for concurrent use.
type Recorder struct {
	Fails int

	mu  sync.Mutex
	got []dedup.Message
}

// Handle records m, and fails if it is one of the first Fails runs.
func (r *Recorder) Handle(_ context.Context, m dedup.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	if len(r.got) <= r.Fails {
		return ErrFlaky
	}
	return nil
}

// Messages returns the messages Handle was given, oldest first.
func (r *Recorder) Messages() []dedup.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dedup.Message(nil), r.got...)
}

// Runs returns how many times Handle ran.
func (r *Recorder) Runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}
