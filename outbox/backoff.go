package outbox

import (
	"math/rand/v2"
	"strings"
	"time"
)

// backoffs are the keys whose last publication failed, with when each may
// be tried again. It belongs to one term's goroutine.
type backoffs struct {
	min, max time.Duration
	keys     map[string]backoff
}

type backoff struct {
	failures int
	until    time.Time
}

func newBackoffs(min, max time.Duration) *backoffs {
	return &backoffs{min: min, max: max, keys: map[string]backoff{}}
}

// waiting reports whether key backs off at now.
func (b *backoffs) waiting(key string, now time.Time) bool {
	k, ok := b.keys[key]
	return ok && now.Before(k.until)
}

// failed records a failure of key at now: min, then doubling up to max,
// less up to a quarter so that keys that failed together do not retry in
// step.
func (b *backoffs) failed(key string, now time.Time) {
	k := b.keys[key]
	d := b.min
	for i := 1; i < k.failures && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	d -= time.Duration(rand.Int64N(int64(d/4) + 1))
	b.keys[key] = backoff{failures: k.failures + 1, until: now.Add(d)}
}

// succeeded forgets key's failures.
func (b *backoffs) succeeded(key string) { delete(b.keys, key) }

// wait is how long to wait from now for the next round: poll, or less if a
// key's backoff ends sooner.
func (b *backoffs) wait(now time.Time, poll time.Duration) time.Duration {
	w := poll
	for _, k := range b.keys {
		if d := k.until.Sub(now); d > 0 && d < w {
			w = d
		}
	}
	return w
}

// maxSkipped bounds the keys a scan leaves out, so that its statement stays
// small; more keys backing off than that are read and skipped.
const maxSkipped = 100

// skipped returns the keys, and the ids of unordered messages, that back
// off at now, at most maxSkipped in all.
func (b *backoffs) skipped(now time.Time) (keys, ids []string) {
	for k, v := range b.keys {
		if len(keys)+len(ids) == maxSkipped {
			break
		}
		if !now.Before(v.until) {
			continue
		}
		if id, ok := strings.CutPrefix(k, unorderedPrefix); ok {
			ids = append(ids, id)
		} else {
			keys = append(keys, k)
		}
	}
	return keys, ids
}
