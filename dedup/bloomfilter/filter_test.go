package bloomfilter_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The sizing follows the textbook formulas, with each of the two generations
// at 1 - sqrt(1 - p) so that a check's combined rate stays within p.
func TestSizing(t *testing.T) {
	t.Parallel()
	s, err := bloomfilter.NewSizing(100_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	pg := 1 - math.Sqrt(0.99)
	if math.Abs(s.GenerationRate-pg) > 1e-12 {
		t.Errorf("GenerationRate = %v, want %v", s.GenerationRate, pg)
	}
	opt := 100_000 * bloomfilter.OptimalBitsPerID(pg)
	if float64(s.Bits) < opt || float64(s.Bits) > opt*1.005 || s.Hashes != 8 {
		t.Errorf("m, k = %d, %d; want within 0.5%% above %.0f, 8", s.Bits, s.Hashes, opt)
	}
	if r := s.ExpectedRate(); r > 0.01 {
		t.Errorf("ExpectedRate = %v, want at most 1%%", r)
	}
	if o := bloomfilter.OptimalBitsPerID(0.01); math.Abs(o-9.585) > 0.001 {
		t.Errorf("OptimalBitsPerID(1%%) = %v, want 9.585", o)
	}
	t.Logf("n=100k p=1%%: m=%d k=%d, %.2f bits per id per generation (optimal single filter at 1%%: %.2f, ratio %.3f), expected rate both full %.4f%%",
		s.Bits, s.Hashes, s.BitsPerID(), bloomfilter.OptimalBitsPerID(0.01), s.BitsPerID()/bloomfilter.OptimalBitsPerID(0.01), 100*s.ExpectedRate())
}

// At capacity, with both generations full (20,000 ids each), the measured
// false-positive rate over 50,000 ids never added is within the configured
// 1% (plus three standard deviations of the count); there are no false
// negatives; and the memory per id is the optimum for each generation's
// rate. The rate depends on m/n and k, not on n, so a larger n would only
// make the test slower. The ids are fixed, so are the counts.
func TestFalsePositiveRateAtCapacity(t *testing.T) {
	t.Parallel()
	const (
		n = 20_000
		p = 0.01
	)
	ctx := context.Background()
	c, prefix := shared(t)
	a := &atCapacity{t: t, f: newFilter(t, c, prefix, n, p), n: n}
	size := a.f.Sizing()

	a.fill(ctx, 0)
	one := a.probe("fresh-one", 20_000, size.GenerationRate)
	st1, _ := a.f.Stats(ctx)
	a.fill(ctx, 1)
	st2, err := a.f.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Previous.BitsSet == 0 || st2.Current.BitsSet == 0 {
		t.Fatalf("after two fills: %+v, want two full generations", st2)
	}
	both := a.probe("fresh-both", 50_000, p)
	a.noFalseNegatives()

	// Memory: m/n is the optimum for the generation rate, and Redis holds
	// the bitmap in about m/8 bytes.
	if opt := bloomfilter.OptimalBitsPerID(size.GenerationRate); size.BitsPerID() > opt*1.005 || size.BitsPerID() < opt {
		t.Errorf("bits per id %.4f, optimum %.4f", size.BitsPerID(), opt)
	}
	usage := generationBytes(ctx, t, c, a.f)
	t.Logf("n=%d p=%.0f%%: m=%d bits, k=%d, %.2f bits/id per generation (%.3fx the 9.59 of one filter at 1%%; optimal for its rate %.3f%%)",
		n, 100*p, size.Bits, size.Hashes, size.BitsPerID(), size.BitsPerID()/bloomfilter.OptimalBitsPerID(p), 100*size.GenerationRate)
	t.Logf("Redis MEMORY USAGE per generation: %d and %d bytes = %.2f and %.2f bits per id",
		usage[0], usage[1], float64(usage[0])*8/n, float64(usage[1])*8/n)
	t.Logf("measured false-positive rate: one generation full %.3f%% (expected %.3f%%, fill %.3f, stats estimate %.3f%%); both full %.3f%% (expected %.3f%%, stats estimate %.3f%%); configured %.0f%%",
		100*one, 100*(1-math.Sqrt(1-size.ExpectedRate())), st1.Current.FillRatio, 100*st1.FalsePositiveRate,
		100*both, 100*size.ExpectedRate(), 100*st2.FalsePositiveRate, 100*p)
	if d := math.Abs(st2.Previous.EstimatedCount-n) / n; d > 0.02 {
		t.Errorf("estimated count of the full generation %.0f, want within 2%% of %d", st2.Previous.EstimatedCount, n)
	}
}

// atCapacity fills a filter's generations to capacity and probes it with
// ids never added.
type atCapacity struct {
	t       *testing.T
	f       *bloomfilter.Filter
	n       int64    // the capacity of a generation
	members []string // every id added, in order
}

// fill adds new ids until generation gen holds n of them.
func (a *atCapacity) fill(ctx context.Context, gen int64) {
	a.t.Helper()
	for {
		st, err := a.f.Stats(ctx)
		if err != nil {
			a.t.Fatal(err)
		}
		if st.Generation == gen && st.Added == a.n {
			return
		}
		todo := a.n
		if st.Generation == gen {
			todo = a.n - st.Added
		}
		batch := ids("member", len(a.members), int(todo))
		if _, err := a.f.TestAndAddBatch(ctx, batch); err != nil {
			a.t.Fatal(err)
		}
		a.members = append(a.members, batch...)
	}
}

// probe tests probes ids never added and returns the share reported seen;
// more false positives than limit plus three standard deviations fail the
// test.
func (a *atCapacity) probe(kind string, probes int, limit float64) float64 {
	a.t.Helper()
	fp := count(testParallel(a.t, a.f, ids(kind, 0, probes)))
	sigma := math.Sqrt(float64(probes) * limit * (1 - limit))
	if float64(fp) > float64(probes)*limit+3*sigma {
		a.t.Errorf("%s: %d false positives in %d, rate %.3f%%, above %.3f%% + 3 sigma", kind, fp, probes, 100*float64(fp)/float64(probes), 100*limit)
	}
	return float64(fp) / float64(probes)
}

// noFalseNegatives checks that ids added to either live generation are
// seen (every 20th, to keep the test short).
func (a *atCapacity) noFalseNegatives() {
	a.t.Helper()
	var sample []string
	for i := 0; i < len(a.members); i += 20 {
		sample = append(sample, a.members[i])
	}
	if miss := len(sample) - count(testParallel(a.t, a.f, sample)); miss != 0 {
		a.t.Errorf("%d of %d added ids reported unseen", miss, len(sample))
	}
}

// generationBytes returns Redis's MEMORY USAGE of the filter's two
// generations; one above m/8 bytes plus allocator rounding fails the test.
func generationBytes(ctx context.Context, t *testing.T, c *redis.Client, f *bloomfilter.Filter) [2]int64 {
	t.Helper()
	var usage [2]int64
	size := f.Sizing()
	for i, k := range f.Keys()[1:] {
		var err error
		usage[i], err = c.MemoryUsage(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if limit := int64(float64(size.Bits/8) * 1.25); usage[i] > limit {
			t.Errorf("%s uses %d bytes, want at most %d (m/8 = %d plus allocator rounding)", k, usage[i], limit, size.Bits/8)
		}
	}
	return usage
}

// A full generation rotates: its ids stay seen through the next generation
// and are forgotten after that.
func TestRotationByCapacity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 50, 0.001)
	old := ids("old", 0, 50)
	if got, err := f.TestAndAddBatch(ctx, old); err != nil || count(got) != 0 {
		t.Fatalf("first adds: %d seen, %v", count(got), err)
	}
	if _, err := f.TestAndAddBatch(ctx, ids("mid", 0, 50)); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Generation != 1 || st.Added != 50 {
		t.Fatalf("after 100 adds: %+v, %v; want generation 1 with 50 ids", st, err)
	}
	if got, _ := f.TestBatch(ctx, old); count(got) != len(old) {
		t.Fatalf("previous generation: %d of %d ids seen, want all", count(got), len(old))
	}
	if _, err := f.TestAndAddBatch(ctx, ids("new", 0, 50)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TestAndAdd(ctx, "one more"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.TestBatch(ctx, old)
	if n := count(got); n > 2 { // expected false positives: 50 x ~0.1%
		t.Fatalf("two rotations later %d of %d old ids still seen, want them aged out", n, len(old))
	}
}

// Ids age out by time: after two periods nothing is left, in the filter or
// in Redis (every key has an expiry within the window).
func TestRotationByPeriod(t *testing.T) {
	t.Parallel()
	// A period of a second: with a shorter one, a loaded machine's sleep
	// can outlast both generations, and the filter starts over at 0.
	const period = time.Second
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 1000, 0.01, bloomfilter.WithPeriod(period))
	before := time.Now()
	if seen, err := f.TestAndAdd(ctx, "a"); err != nil || seen {
		t.Fatalf("TestAndAdd(a) = %v, %v", seen, err)
	}
	if seen, _ := f.Test(ctx, "a"); !seen && time.Since(before) < period {
		t.Fatal("a unseen within its period")
	}
	for _, k := range f.Keys()[:2] { // the state and the current generation
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 2*period {
			t.Errorf("%s PTTL %v, want within (0, %v]", k, ttl, 2*period)
		}
	}
	time.Sleep(period + 50*time.Millisecond)
	// One period on: a is in the previous generation; an add rotates.
	if _, err := f.TestAndAdd(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stats(ctx)
	if st.Generation != 1 {
		t.Errorf("after one period: generation %d, want 1", st.Generation)
	}
	if seen, _ := f.Test(ctx, "a"); !seen && time.Since(before) < 2*period {
		t.Error("a forgotten within two periods")
	}
	time.Sleep(2*period + 50*time.Millisecond)
	for _, id := range []string{"a", "b"} {
		if seen, _ := f.Test(ctx, id); seen {
			t.Errorf("%s still seen after two periods", id)
		}
	}
	time.Sleep(50 * time.Millisecond) // past the keys' PEXPIREAT on Redis's clock
	if n := c.Exists(ctx, f.Keys()...).Val(); n != 0 {
		t.Errorf("%d of the filter's keys left after its window", n)
	}
}

// Of 32 consumers adding the same new id at once, exactly one is told it is
// new; the same holds for every id of two racing batches.
func TestConcurrentTestAndAdd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 10_000, 0.01)
	for round := range 10 {
		id := ids("race", round, 1)[0]
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			news int
		)
		start := make(chan struct{})
		for range 32 {
			wg.Go(func() {
				<-start
				seen, err := f.TestAndAdd(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				if !seen {
					mu.Lock()
					news++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if news != 1 {
			t.Fatalf("round %d: %d of 32 consumers saw %q as new, want exactly 1", round, news, id)
		}
	}
	batch := ids("batch", 0, 2500)
	var res [2][]bool
	var wg sync.WaitGroup
	for i := range res {
		wg.Go(func() {
			var err error
			if res[i], err = f.TestAndAddBatch(ctx, batch); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range batch {
		if res[0][i] == res[1][i] {
			t.Fatalf("id %d: both batches saw seen=%v, want exactly one new", i, res[0][i])
		}
	}
}

// Bad input is refused with a clear error before anything reaches Redis.
func TestInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	for _, tc := range []struct {
		name string
		n    int64
		p    float64
		opts []bloomfilter.Option
	}{
		{"zero capacity", 0, 0.01, nil},
		{"negative capacity", -5, 0.01, nil},
		{"zero rate", 1000, 0, nil},
		{"rate one", 1000, 1, nil},
		{"negative rate", 1000, -0.1, nil},
		{"NaN rate", 1000, math.NaN(), nil},
		{"too big for a Redis string", 1 << 40, 0.01, nil},
		{"zero period", 1000, 0.01, []bloomfilter.Option{bloomfilter.WithPeriod(0)}},
		{"prefix with a brace", 1000, 0.01, []bloomfilter.Option{bloomfilter.WithPrefix("a{")}},
	} {
		opts := append([]bloomfilter.Option{bloomfilter.WithPrefix(prefix)}, tc.opts...)
		if _, err := bloomfilter.New(c, "f", tc.n, tc.p, opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", tc.name, err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if _, err := bloomfilter.New(nil, "f", 10, 0.01); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := bloomfilter.New(c, "a}b", 10, 0.01); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("name with a brace: %v", err)
	}
	f := newFilter(t, c, prefix, 10, 0.01)
	if _, err := f.TestAndAdd(ctx, ""); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("empty id: %v, want ErrInvalidID", err)
	}
	if _, err := f.TestAndAddBatch(ctx, []string{"ok", "bad\n"}); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("batch with a control character: %v, want ErrInvalidID", err)
	}
	if _, err := bloomfilter.NewLossy(f).Claim(ctx, "", time.Second); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("Lossy empty id: %v, want ErrInvalidID", err)
	}
	if n := c.Exists(ctx, f.Keys()...).Val(); n != 0 {
		t.Errorf("refused calls created %d keys", n)
	}
	if seen, err := f.TestAndAdd(ctx, "ok"); err != nil || seen {
		t.Errorf("the batch's valid id was added anyway: %v, %v", seen, err)
	}
}

// Two clients that disagree on the size of one filter are refused instead of
// corrupting it.
func TestSizingMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	a := newFilter(t, c, prefix, 1000, 0.01)
	b := newFilter(t, c, prefix, 2000, 0.01)
	if _, err := a.TestAndAdd(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TestAndAdd(ctx, "y"); !errors.Is(err, bloomfilter.ErrSizingMismatch) {
		t.Fatalf("other sizing: %v, want ErrSizingMismatch", err)
	}
	if seen, _ := a.Test(ctx, "y"); seen {
		t.Error("the refused add changed the filter")
	}
}

// An id given twice in a batch is reported seen by its second occurrence,
// also when the current generation fills up between the two: capacity 3,
// so "d" starts generation 1 and "a" and "b" are then found in generation
// 0, which is the previous one.
func TestBatchRepeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 3, 0.0001)
	got, err := f.TestAndAddBatch(ctx, []string{"a", "b", "a", "c", "d", "a", "e", "b", "e"})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, false, true, false, false, true, false, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("TestAndAddBatch = %v, want %v", got, want)
		}
	}
	st, err := f.Stats(ctx)
	if err != nil || st.Generation != 1 || st.Added != 2 {
		t.Fatalf("after the batch: %+v, %v; want generation 1 holding d and e", st, err)
	}
	if got, _ := f.TestBatch(ctx, []string{"a", "b", "c", "d", "e", "f"}); count(got[:5]) != 5 || got[5] {
		t.Errorf("TestBatch = %v, want a to e seen and f not", got)
	}
}

// raceRounds has 8 consumers, each with its own Filter on one name, add
// the same ids at once, round after round, each in its own order, some one
// at a time and some in a batch, while the generations rotate under them;
// and checks that exactly one consumer was told each id is new. A round's
// ids fit in less than two generations, so none is forgotten within its
// round. It stops after rounds rounds or, with untilGen above 0, once
// the generation reaches untilGen, and returns the generation reached and
// the number of steps sent as plain-command transactions (EXEC).
func raceRounds(t *testing.T, name string, rounds, perRound int, untilGen, capacity int64, opts ...bloomfilter.Option) (int64, int64) {
	t.Helper()
	ctx := context.Background()
	c, prefix := shared(t)
	sent := testsvc.CountCommands(c)
	const consumers = 8
	fs := make([]*bloomfilter.Filter, consumers)
	for i := range fs {
		var err error
		fs[i], err = bloomfilter.New(c, name, capacity, 1e-6, append([]bloomfilter.Option{bloomfilter.WithPrefix(prefix)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
	}
	for round := range rounds {
		if untilGen > 0 && round%10 == 0 {
			if st, err := fs[0].Stats(ctx); err != nil || st.Generation >= untilGen {
				break
			}
		}
		batch := ids(fmt.Sprintf("r%d", round), 0, perRound)
		news := raceRound(ctx, t, fs, round, batch)
		for i := range news {
			if n := news[i].Load(); n != 1 {
				t.Fatalf("round %d: %d of %d consumers were told %s is new, want exactly 1", round, n, consumers, batch[i])
			}
		}
	}
	st, err := fs[0].Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Generation, sent.Counts()["exec"]
}

// raceRound has every filter of fs add batch at once, each in its own
// order, and returns how many were told each id is new.
func raceRound(ctx context.Context, t *testing.T, fs []*bloomfilter.Filter, round int, batch []string) []atomic.Int32 {
	news := make([]atomic.Int32, len(batch))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for ci, f := range fs {
		wg.Go(func() {
			order := rand.New(rand.NewPCG(uint64(round), uint64(ci))).Perm(len(batch))
			<-start
			if err := addInOrder(ctx, f, batch, order, news); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	return news
}

// addInOrder adds the ids of batch in order's order, the first half one at
// a time and the rest in one batch, counting in news each id f was told is
// new.
func addInOrder(ctx context.Context, f *bloomfilter.Filter, batch []string, order []int, news []atomic.Int32) error {
	half := len(order) / 2
	for _, i := range order[:half] {
		seen, err := f.TestAndAdd(ctx, batch[i])
		if err != nil {
			return err
		}
		if !seen {
			news[i].Add(1)
		}
	}
	rest := make([]string, 0, len(order)-half)
	for _, i := range order[half:] {
		rest = append(rest, batch[i])
	}
	got, err := f.TestAndAddBatch(ctx, rest)
	if err != nil {
		return err
	}
	for j, i := range order[half:] {
		if !got[j] {
			news[i].Add(1)
		}
	}
	return nil
}

// Exactly one of the racing consumers is told an id is new, also while
// the current generation fills up (capacity 7, 6 new ids a round) and
// rotates many times under them.
func TestConcurrentAcrossRotationByCapacity(t *testing.T) {
	t.Parallel()
	if g, _ := raceRounds(t, "cap", 150, 6, 0, 7); g < 100 {
		t.Errorf("generation %d after 900 ids at capacity 7, want at least 100 rotations", g)
	}
}

// Exactly one of the racing consumers is told an id is new while most
// steps are plain-command transactions and the script takes the last of
// each generation's capacity and rotates it (capacity 3000, 400 new ids a
// round): a transaction and a rotation never interleave, so an id added
// just before a rotation is found in the previous generation just after.
func TestConcurrentPlainAndScriptAcrossRotations(t *testing.T) {
	t.Parallel()
	g, execs := raceRounds(t, "plain", 25, 400, 0, 3000)
	if g < 2 {
		t.Errorf("generation %d after 10,000 ids at capacity 3000, want at least 2 rotations", g)
	}
	if execs < 1000 {
		t.Errorf("%d steps of 8 consumers' 10,000 ids were plain-command transactions, want most", execs)
	}
}

// Exactly one of the racing consumers is told an id is new, also while
// generations rotate by time (a 1 s period, on Redis's clock) under
// them, twice. A round takes a few milliseconds, far less than the period
// an id is remembered at least; with a 100 ms period a consumer stalled
// for 100 ms under the race detector on a busy machine was rightly told
// an id two rotations old was new.
func TestConcurrentAcrossRotationByPeriod(t *testing.T) {
	t.Parallel()
	if g, execs := raceRounds(t, "period", 5000, 6, 3, 10_000, bloomfilter.WithPeriod(time.Second)); g < 3 || execs == 0 {
		t.Errorf("generation %d, want 3, with plain-command steps (%d)", g, execs)
	}
}

// A batch longer than one BITFIELD takes (1800/k ids) is set
// in several, in order: 500 new ids then the same 500 again, in one call
// (k = 31 at 1e-9: 58 ids a command).
func TestBatchOfManyCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 10_000, 1e-9)
	if k := f.Sizing().Hashes; k != 31 {
		t.Fatalf("k = %d, want 31", k)
	}
	batch := ids("many", 0, 500)
	got, err := f.TestAndAddBatch(ctx, append(batch, batch...))
	if err != nil {
		t.Fatal(err)
	}
	if n, m := count(got[:500]), count(got[500:]); n != 0 || m != 500 {
		t.Fatalf("%d of 500 new ids seen, %d of their 500 repeats seen; want 0 and 500", n, m)
	}
	if st, err := f.Stats(ctx); err != nil || st.Added != 500 {
		t.Fatalf("Stats = %+v, %v; want 500 added", st, err)
	}
}

// A filter whose state hash is deleted while consumers add (an operator's
// DEL, say) forgets nothing: adds go on by plain commands into the fixed
// current generation, and the next step through the script makes the state
// again around the bitmap it finds, with every key expiring.
func TestStateLostWhileAdding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 100_000, 0.01)
	a, b, d := ids("a", 0, 50), ids("b", 0, 50), ids("d", 0, 50)
	for _, batch := range [][]string{a, b, d} {
		if batch[0] == b[0] {
			if err := c.Del(ctx, f.Keys()[0]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range batch {
			if seen, err := f.TestAndAdd(ctx, id); err != nil || seen {
				t.Fatalf("%s: seen %v, %v; want new", id, seen, err)
			}
		}
	}
	for _, batch := range [][]string{a, b, d} {
		got, err := f.TestBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(got); n != len(batch) {
			t.Errorf("%d of %d ids added around the lost state seen, want all", n, len(batch))
		}
	}
	for _, k := range f.Keys()[:2] {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s: PTTL %v, want an expiry", k, ttl)
		}
	}
	if st, err := f.Stats(ctx); err != nil || st.Added == 0 {
		t.Errorf("Stats = %+v, %v; want the state made again with a count", st, err)
	}
}
