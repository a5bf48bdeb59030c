package bloomfilter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
)

// The prefilter in front of dedup/redisstore keeps the whole dedup.Store contract.
func TestPrefilterConformance(t *testing.T) {
	t.Parallel()
	c, prefix := shared(t)
	s := bloomfilter.NewPrefilter(newFilter(t, c, prefix, 100_000, 0.01), redisstore.New(c, redisstore.WithPrefix(prefix+"exact:")))
	deduptest.Run(t, func(*testing.T) dedup.Store { return s })
}

// A tiny, overfull filter answers "maybe" for nearly every id; the exact
// store still processes every new message once, and the false hits are
// counted.
func TestPrefilterFalsePositivesLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 10, 0.5)
	s := bloomfilter.NewPrefilter(f, redisstore.New(c, redisstore.WithPrefix(prefix+"exact:")))
	d, err := dedup.New(s)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	h := d.Wrap(func(_ context.Context, m dedup.Message) error {
		mu.Lock()
		runs[m.ID]++
		mu.Unlock()
		return nil
	})
	msgs := ids("m", 0, 160)
	var wg sync.WaitGroup
	for w := range 8 { // 8 consumers, each delivering its share of ids twice
		wg.Go(func() {
			for i := w; i < len(msgs); i += 8 {
				for range 2 {
					if err := h(ctx, dedup.Message{ID: msgs[i]}); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, id := range msgs {
		if runs[id] != 1 {
			t.Fatalf("%s processed %d times, want 1", id, runs[id])
		}
	}
	st := s.Stats()
	if st.FalseHits == 0 || st.Hits < int64(len(msgs)) || st.Misses+st.Hits != 2*int64(len(msgs)) {
		t.Errorf("stats %+v: want every claim counted and false hits seen", st)
	}
	t.Logf("overfull prefilter: %+v", st)

	// A batch goes through the exact store's ClaimBatch.
	got, err := s.ClaimBatch(ctx, []string{msgs[0], "fresh"}, time.Minute)
	if err != nil || got[0].State != dedup.Done || got[1].State != dedup.Claimed {
		t.Fatalf("ClaimBatch = %+v, %v; want done, claimed", got, err)
	}
}
