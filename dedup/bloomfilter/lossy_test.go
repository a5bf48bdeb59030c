package bloomfilter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
)

// The lossy store keeps the exact claim cycle: one winner among racing
// copies, duplicates after Done, a released or crashed claim processed again,
// stale tokens refused.
func TestLossyCycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	s := bloomfilter.NewLossy(newFilter(t, c, prefix, 10_000, 0.01))

	// 32 consumers race on one new id: exactly one is claimed.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		tokens []string
	)
	start := make(chan struct{})
	for range 32 {
		wg.Go(func() {
			<-start
			cl, err := s.Claim(ctx, "race", time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if cl.State == dedup.Claimed {
				mu.Lock()
				tokens = append(tokens, cl.Token)
				mu.Unlock()
			} else if cl.State != dedup.InProgress || cl.RetryAfter <= 0 {
				t.Errorf("loser: %+v, want in progress with a delay", cl)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(tokens) != 1 {
		t.Fatalf("%d of 32 racing claims won, want exactly 1", len(tokens))
	}
	if err := s.Done(ctx, "race", "not-the-token", time.Hour); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("Done with a wrong token = %v, want ErrClaimLost", err)
	}
	if err := s.Done(ctx, "race", tokens[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	if cl, _ := s.Claim(ctx, "race", time.Minute); cl.State != dedup.Done {
		t.Errorf("after Done: %v, want done", cl.State)
	}
	if err := s.Done(ctx, "race", tokens[0], time.Hour); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("second Done = %v, want ErrClaimLost", err)
	}

	// A failed handler releases: the redelivery is processed.
	cl, _ := s.Claim(ctx, "fails", time.Minute)
	if err := s.Release(ctx, "fails", cl.Token); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Claim(ctx, "fails", time.Minute); again.State != dedup.Claimed || again.Token == cl.Token {
		t.Errorf("after Release: %+v, want a new claim", again)
	}

	// A crashed consumer's claim expires: the redelivery is processed and
	// the late Done is refused.
	crashed, _ := s.Claim(ctx, "crash", 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	taken, _ := s.Claim(ctx, "crash", time.Minute)
	if taken.State != dedup.Claimed {
		t.Fatalf("after the claim's TTL: %v, want claimed", taken.State)
	}
	if err := s.Done(ctx, "crash", crashed.Token, time.Hour); !errors.Is(err, dedup.ErrClaimLost) {
		t.Errorf("late Done = %v, want ErrClaimLost", err)
	}
	if n := c.Exists(ctx, prefix+"{f}:claim:race", prefix+"{f}:claim:fails").Val(); n != 1 {
		t.Errorf("%d claim keys left for one done and one claimed id, want 1", n)
	}
}

// A batch claims like single calls, in one round trip; an id given twice is
// claimed by its first occurrence.
func TestLossyBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	s := bloomfilter.NewLossy(newFilter(t, c, prefix, 10_000, 0.01))
	d, _ := s.Claim(ctx, "done", time.Minute)
	if err := s.Done(ctx, "done", d.Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, _ = s.Claim(ctx, "busy", time.Minute)
	got, err := s.ClaimBatch(ctx, []string{"new", "done", "busy", "new"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []dedup.State{dedup.Claimed, dedup.Done, dedup.InProgress, dedup.InProgress}
	for i := range want {
		if got[i].State != want[i] {
			t.Errorf("ClaimBatch[%d] = %v, want %v", i, got[i].State, want[i])
		}
	}
	if err := s.Done(ctx, "new", got[0].Token, time.Hour); err != nil {
		t.Errorf("Done with a batch token: %v", err)
	}
}

// Alone, the filter drops genuinely new messages at about its
// false-positive rate once full, and not more: the price stated in the
// documentation. Capacity 300 at 1%; messages arrive in batches of 50,
// claimed in one round trip and marked done by 8 workers.
func TestLossyDropsAtMostTheRate(t *testing.T) {
	t.Parallel()
	const n, p = 300, 0.01
	ctx := context.Background()
	c, prefix := shared(t)
	s := bloomfilter.NewLossy(newFilter(t, c, prefix, n, p))
	msgs := ids("msg", 0, 2*n) // fills both generations
	processed := 0
	for lo := 0; lo < len(msgs); lo += 50 {
		batch := msgs[lo : lo+50]
		cs, err := s.ClaimBatch(ctx, batch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		work := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range work {
					if err := s.Done(ctx, batch[i], cs[i].Token, time.Hour); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for i, cl := range cs {
			if cl.State == dedup.Claimed {
				processed++
				work <- i
			} else if cl.State != dedup.Done {
				t.Errorf("new message %s: %v", batch[i], cl.State)
			}
		}
		close(work)
		wg.Wait()
	}
	dropped := len(msgs) - processed
	// Every redelivery within the window is stopped.
	again, err := s.ClaimBatch(ctx, msgs[n:], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, cl := range again {
		if cl.State != dedup.Done {
			t.Fatalf("redelivery of %s: %v, want done", msgs[n+i], cl.State)
		}
	}
	// While filling, the rate climbs from 0 to p: well under p on average.
	if float64(dropped) > p*float64(len(msgs)) {
		t.Errorf("dropped %d of %d new messages, more than %.0f%%", dropped, len(msgs), 100*p)
	}
	t.Logf("lossy: %d of %d new messages dropped (%.3f%%) while filling two generations of %d at %.0f%%", dropped, len(msgs), 100*float64(dropped)/float64(len(msgs)), n, 100*p)
}
