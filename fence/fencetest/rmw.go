package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// Bounds of a ReadModifyWrite run. The lease is short so that pauses make
// stale holders often; the check's verdict does not depend on any timing.
const (
	rmwProcs = 3
	rmwOps   = 25                     // read-modify-writes per worker
	rmwTTL   = 300 * time.Millisecond // shorter than most pauses
	// rmwDeadline detects a hung run. Alone a run takes 7-30 s: on
	// PostgreSQL, where Lockers queue, a release promised to a paused
	// Locker waits out the promise's second; with every package of the
	// suite running beside it a run took longer than a minute.
	rmwDeadline = 2 * time.Minute
)

// RMWReport counts what a ReadModifyWrite run did.
type RMWReport struct {
	Applied, Stale, Unknown int // read-modify-writes by outcome
	Zombies                 int // claims with a given-up lease's token, all refused
	Pauses                  int // SIGSTOP/SIGCONT pairs
	Final                   int64
}

func (r RMWReport) String() string {
	return fmt.Sprintf("%d increments applied, %d refused stale, %d unknown; %d claims with a given-up lease's token refused; %d pauses (SIGSTOP 300-1200 ms); final count %d",
		r.Applied, r.Stale, r.Unknown, r.Zombies, r.Pauses, r.Final)
}

// ReadModifyWrite runs worker processes that increment one counter of target
// by read-modify-write, each under a lock lease of 300 ms: claim and read
// the counter (Register.Claim), work a little, write the value read plus
// one. Meanwhile this process pauses them at random (SIGSTOP, then SIGCONT
// after 300-1200 ms), so holders wake up with leases that others have taken
// over, between their read and their write; workers also try to claim with
// tokens of leases they have given up. It fails the test unless the counter
// ends equal to the number of increments acknowledged as applied: an
// acknowledged increment that a later write erased is a lost update. It takes
// a few seconds.
func ReadModifyWrite(t *testing.T, target Target, config string) RMWReport {
	conn := open(t, target, config)
	key := "rmw-" + randHex(6)
	if err := conn.Register.Write(t.Context(), fence.Token(1), key, "0"); err != nil {
		t.Fatalf("create the counter: %v", err)
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kids := make([]*suitekit.Child, rmwProcs)
	for i := range kids {
		kids[i] = startChild(t, target, config, "rmw", fmt.Sprintf("%s %d %d", key, rmwOps, r.Uint64()))
	}
	results, done := rmwResults(kids)

	// Faults: every 50-150 ms, a random worker not already paused is
	// stopped for 300-1200 ms, each pause on its own goroutine.
	var pauses pauser
	deadline := time.After(rmwDeadline)
loop:
	for {
		select {
		case <-done:
			break loop
		case <-deadline:
			t.Fatalf("read-modify-write run not finished within %v", rmwDeadline)
		case <-time.After(time.Duration(50+r.IntN(100)) * time.Millisecond):
		}
		i := r.IntN(len(kids))
		pauses.pause(i, kids[i], time.Duration(300+r.IntN(900))*time.Millisecond)
	}
	pauses.wait()
	close(results)
	rep := tallyRMW(t, results)
	rep.Pauses = pauses.count
	v, _, err := conn.Register.Read(t.Context(), key)
	if err != nil {
		t.Fatalf("final read: %v", err)
	}
	if rep.Final, err = strconv.ParseInt(v, 10, 64); err != nil {
		t.Fatalf("counter holds %q", v)
	}
	t.Logf("%s: %v", target.Name, rep)
	if rep.Final < int64(rep.Applied) || rep.Final > int64(rep.Applied+rep.Unknown) {
		t.Errorf("counter is %d after %d increments acknowledged (and %d unknown): %d lost updates",
			rep.Final, rep.Applied, rep.Unknown, int64(rep.Applied)-rep.Final)
	}
	if rep.Stale+rep.Zombies == 0 {
		t.Errorf("no claim or write was refused as stale: the run did not exercise the fence")
	}
	return rep
}

// rmwResults reads the workers' lines and passes on their result lines;
// done is closed once every worker has exited.
func rmwResults(kids []*suitekit.Child) (results chan string, done chan struct{}) {
	results = make(chan string, len(kids))
	done = make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range kids {
		wg.Go(func() {
			for line := range c.Lines {
				if rest, ok := strings.CutPrefix(line, "result "); ok {
					results <- rest
				}
			}
			_ = c.Wait()
		})
	}
	go func() { wg.Wait(); close(done) }()
	return results, done
}

// tallyRMW adds up the workers' results, failing the test if a claim with
// a given-up lease's token was admitted or a worker did not report.
func tallyRMW(t *testing.T, results <-chan string) RMWReport {
	t.Helper()
	var rep RMWReport
	n := 0
	for res := range results {
		n++
		f := map[string]int{}
		for _, kv := range strings.Fields(res) {
			k, v, _ := strings.Cut(kv, "=")
			f[k], _ = strconv.Atoi(v)
		}
		rep.Applied += f["applied"]
		rep.Stale += f["stale"]
		rep.Unknown += f["unknown"]
		rep.Zombies += f["zombie"]
		if f["admitted"] > 0 {
			t.Errorf("%d claims with the token of a lease given up were not refused", f["admitted"])
		}
	}
	if n != rmwProcs {
		t.Fatalf("%d of %d workers reported", n, rmwProcs)
	}
	return rep
}

// rmwChild is one worker: args are "key ops seed". It prints one line at
// the end: "result applied=N stale=N unknown=N zombie=N admitted=N", zombie
// counting refused claims with a given-up lease's token, admitted those not
// refused.
func rmwChild(ctx context.Context, conn *Conn, args string) int {
	f := strings.Fields(args)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "rmw child: args %q\n", args)
		return 2
	}
	key, ops := f[0], atoi(f[1])
	seed, _ := strconv.ParseUint(f[2], 10, 64)
	r := rand.New(rand.NewPCG(seed, 3))
	var applied, stale, unknown, zombie, admitted int
	var old uint64 // a token of a lease given up

	for range ops {
		lease, err := conn.Locker.Acquire(ctx, key, lock.WithTTL(rmwTTL), lock.WithWait(10*time.Second))
		if err != nil {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, linOpTimeout)
		// No look at lease.Done(): like a holder paused at the wrong
		// moment, we go on, and the resource must decide.
		v, err := conn.Register.Claim(octx, lease, key)
		switch {
		case errors.Is(err, fence.ErrStale):
			stale++
		case err != nil:
			// A failed claim changed no value: nothing to count.
		default:
			n, _ := strconv.ParseInt(v, 10, 64)
			time.Sleep(time.Duration(r.IntN(40)) * time.Millisecond) // the work
			switch err := conn.Register.Write(octx, lease, key, strconv.FormatInt(n+1, 10)); {
			case errors.Is(err, fence.ErrStale):
				stale++
			case err != nil:
				unknown++
			default:
				applied++
			}
		}
		if old != 0 && r.IntN(3) == 0 {
			if _, err := conn.Register.Claim(octx, fence.Token(old), key); errors.Is(err, fence.ErrStale) {
				zombie++
			} else {
				admitted++
			}
		}
		cancel()
		old = lease.Token()
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_ = lease.Release(rctx)
		rcancel()
	}
	fmt.Printf("result applied=%d stale=%d unknown=%d zombie=%d admitted=%d\n", applied, stale, unknown, zombie, admitted)
	return 0
}
