package fencetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// Bounds of a Linearize run.
const (
	linHistories  = 2                      // histories per run
	linProcs      = 3                      // concurrent worker processes
	linKeys       = 3                      // keys per history
	linOps        = 70                     // operations per worker process
	linKills      = 2                      // SIGKILLs per history at most
	linTTL        = 250 * time.Millisecond // workers' lease TTL, shorter than most pauses
	linOpTimeout  = 5 * time.Second        // one operation's bound
	linDeadline   = 2 * time.Minute        // one history's bound: a hang, not a slow machine (27 s alone, with -race)
	checkTimeout  = 30 * time.Second       // porcupine's bound
	neverReturned = int64(1) << 62         // the return time of a call cut short by a kill
)

// Report counts what a Linearize run checked and the faults it injected.
type Report struct {
	Histories, Ops, Reads      int
	Applied, Stale, Unknown    int // writes by outcome
	Pauses, Kills, ZombieWrite int // SIGSTOP/SIGCONT pairs, SIGKILLs, writes with a superseded token
}

func (r Report) String() string {
	return fmt.Sprintf("%d histories, %d operations (%d reads; writes: %d applied, %d refused stale, %d unknown; %d zombie writes with an older lease's token); faults: %d pauses (SIGSTOP 200-1200 ms), %d kills (SIGKILL)",
		r.Histories, r.Ops, r.Reads, r.Applied, r.Stale, r.Unknown, r.ZombieWrite, r.Pauses, r.Kills)
}

// Linearize runs worker processes that lock keys of target with short leases
// and write and read them through its Register, while this process pauses
// them at random (SIGSTOP, then SIGCONT after 200-1200 ms, longer than the
// leases) and kills some (SIGKILL, replaced by fresh workers). Workers also
// write on purpose with tokens of leases they have given up. It records every
// call and return on one monotonic clock and fails the test unless each
// history is linearizable under Model and no stale write was applied (Check).
// A run is a few histories of a few hundred operations, well under a minute.
func Linearize(t *testing.T, target Target, config string) Report {
	conn := open(t, target, config)
	var total Report
	for h := range linHistories {
		r := runHistory(t, target, config, conn, uint64(h))
		total.Histories++
		total.Ops += r.Ops
		total.Reads += r.Reads
		total.Applied += r.Applied
		total.Stale += r.Stale
		total.Unknown += r.Unknown
		total.Pauses += r.Pauses
		total.Kills += r.Kills
		total.ZombieWrite += r.ZombieWrite
	}
	t.Logf("%s: %v", target.Name, total)
	if total.Stale == 0 {
		t.Errorf("no write was refused as stale: the run did not exercise the fence")
	}
	return total
}

// recorder collects the events children report.
type recorder struct {
	mu      sync.Mutex
	pending map[string]porcupine.Operation // call id -> call half
	ops     []porcupine.Operation
	zombies int
	bad     []string
}

func (rec *recorder) line(client int, line string) {
	f := strings.Fields(line)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	switch {
	case len(f) >= 5 && f[0] == "C": // C id time key r | C id time key w token value zombie
		ts, _ := strconv.ParseInt(f[2], 10, 64)
		op := Op{Key: f[3]}
		if f[4] == "w" && len(f) == 8 {
			op.Write = true
			op.Token, _ = strconv.ParseUint(f[5], 10, 64)
			op.Value = f[6]
			if f[7] == "zombie" {
				rec.zombies++
			}
		}
		rec.pending[f[1]] = porcupine.Operation{ClientId: client, Input: op, Call: ts}
	case len(f) >= 4 && f[0] == "R": // R id time status [value token]
		op, ok := rec.pending[f[1]]
		if !ok {
			rec.bad = append(rec.bad, line)
			return
		}
		delete(rec.pending, f[1])
		ts, _ := strconv.ParseInt(f[2], 10, 64)
		out := Outcome{Status: f[3]}
		if !op.Input.(Op).Write {
			if f[3] != "ok" || len(f) != 6 {
				return // a failed read tells nothing
			}
			out.Value = strings.TrimPrefix(f[4], "=")
			out.Token, _ = strconv.ParseUint(f[5], 10, 64)
		}
		op.Output, op.Return = out, ts
		rec.ops = append(rec.ops, op)
	default:
		rec.bad = append(rec.bad, line)
	}
}

func runHistory(t *testing.T, target Target, config string, conn *Conn, seed uint64) Report {
	h := &history{
		t: t, target: target, config: config,
		r:    rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano()))),
		rec:  &recorder{pending: map[string]porcupine.Operation{}},
		live: map[int]*worker{},
	}
	prefix := "lin-" + randHex(4) + "-"
	h.keys = make([]string, linKeys)
	for i := range h.keys {
		h.keys[i] = prefix + strconv.Itoa(i)
	}
	for range linProcs {
		h.start(linOps)
	}
	h.injectFaults()
	h.workers.Wait()
	h.readFinal(conn)
	rep := h.report()
	if err := Check(h.rec.ops); err != nil {
		t.Errorf("%s: %v", target.Name, err)
		dumpHistory(t, h.rec.ops)
	}
	return rep
}

// worker is a running worker process of a history.
type worker struct {
	c    *suitekit.Child
	done chan struct{} // closed once it has exited and its lines are read
}

// history is one Linearize history: its workers, the faults injected into
// them and the operations they reported.
type history struct {
	t      *testing.T
	target Target
	config string
	r      *rand.Rand // used by the test's goroutine only
	keys   []string
	rec    *recorder

	mu      sync.Mutex
	live    map[int]*worker // guarded by mu
	clients int             // workers started; guarded by mu
	workers sync.WaitGroup

	pauses pauser
	kills  int
}

// start starts a worker that runs ops operations, and a goroutine that
// records its lines until it exits.
func (h *history) start(ops int) {
	h.mu.Lock()
	id := h.clients
	h.clients++
	h.mu.Unlock()
	args := fmt.Sprintf("%d %d %d %s", id, ops, h.r.Uint64(), strings.Join(h.keys, ","))
	w := &worker{c: startChild(h.t, h.target, h.config, "linearize", args), done: make(chan struct{})}
	h.mu.Lock()
	h.live[id] = w
	h.mu.Unlock()
	h.workers.Go(func() {
		for line := range w.c.Lines {
			h.rec.line(id, line)
		}
		_ = w.c.Wait()
		h.mu.Lock()
		delete(h.live, id)
		h.mu.Unlock()
		close(w.done)
	})
}

// running returns the ids of the live workers that are not paused, and
// the number of live workers.
func (h *history) running() ([]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]int, 0, len(h.live))
	for id := range h.live {
		if !h.pauses.isPaused(id) {
			ids = append(ids, id)
		}
	}
	return ids, len(h.live)
}

// injectFaults runs until every worker has exited: every 50-150 ms a
// random running worker that is not paused is stopped for 200-1200 ms
// (longer than its leases, mostly), each pause on its own goroutine so
// pauses overlap; linKills times, at a random moment, a random worker is
// killed and replaced.
func (h *history) injectFaults() {
	var killAt []time.Time
	started := time.Now()
	for range linKills {
		killAt = append(killAt, started.Add(time.Duration(300+h.r.IntN(2500))*time.Millisecond))
	}
	deadline := time.After(linDeadline)
	for {
		ids, n := h.running()
		if n == 0 {
			break
		}
		select {
		case <-deadline:
			h.t.Fatalf("history not finished within %v", linDeadline)
		case <-time.After(time.Duration(50+h.r.IntN(100)) * time.Millisecond):
		}
		if len(ids) == 0 {
			continue
		}
		id := ids[h.r.IntN(len(ids))]
		h.mu.Lock()
		w := h.live[id]
		h.mu.Unlock()
		if w == nil {
			continue
		}
		if len(killAt) > 0 && time.Now().After(killAt[0]) {
			killAt = killAt[1:]
			w.c.Signal(syscall.SIGKILL)
			<-w.done
			h.kills++
			h.start(linOps / 2)
			continue
		}
		h.pauses.pause(id, w.c, time.Duration(200+h.r.IntN(1000))*time.Millisecond)
	}
	h.pauses.wait()
}

// readFinal records a read of every key, after every worker has gone, and
// the writes cut short by a kill, which may or may not have been applied.
func (h *history) readFinal(conn *Conn) {
	final := h.clients
	for _, k := range h.keys {
		call := suitekit.Now()
		v, tok, err := conn.Register.Read(h.t.Context(), k)
		if err != nil {
			h.t.Fatalf("final read of %s: %v", k, err)
		}
		h.rec.ops = append(h.rec.ops, porcupine.Operation{ClientId: final, Input: Op{Key: k},
			Output: Outcome{Status: "ok", Value: v, Token: tok}, Call: call, Return: suitekit.Now()})
	}
	for _, op := range h.rec.pending {
		if op.Input.(Op).Write {
			op.Output, op.Return = Outcome{Status: "unknown"}, neverReturned
			h.rec.ops = append(h.rec.ops, op)
		}
	}
	if len(h.rec.bad) > 0 {
		h.t.Errorf("unparsable lines from workers: %q", h.rec.bad)
	}
}

// report counts the history's operations by kind and outcome, and the
// faults injected.
func (h *history) report() Report {
	rep := Report{Ops: len(h.rec.ops), ZombieWrite: h.rec.zombies, Pauses: h.pauses.count, Kills: h.kills}
	for _, op := range h.rec.ops {
		in, out := op.Input.(Op), op.Output.(Outcome)
		switch {
		case !in.Write:
			rep.Reads++
		case out.Status == "ok":
			rep.Applied++
		case out.Status == "stale":
			rep.Stale++
		default:
			rep.Unknown++
		}
	}
	return rep
}

// pauser stops worker processes for a while (SIGSTOP, then SIGCONT from a
// goroutine of its own, so pauses overlap), one pause at a time per worker.
type pauser struct {
	mu     sync.Mutex
	paused map[int]bool // guarded by mu
	wg     sync.WaitGroup
	count  int // pauses begun; used by the test's goroutine only
}

// isPaused reports whether worker id is stopped.
func (p *pauser) isPaused(id int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id]
}

// pause stops c, worker id, for d, unless it is stopped already.
func (p *pauser) pause(id int, c *suitekit.Child, d time.Duration) {
	p.mu.Lock()
	if p.paused[id] {
		p.mu.Unlock()
		return
	}
	if p.paused == nil {
		p.paused = map[int]bool{}
	}
	p.paused[id] = true
	p.mu.Unlock()
	p.count++
	c.Signal(syscall.SIGSTOP)
	p.wg.Go(func() {
		time.Sleep(d)
		c.Signal(syscall.SIGCONT)
		p.mu.Lock()
		delete(p.paused, id)
		p.mu.Unlock()
	})
}

// wait waits for every paused worker to be continued.
func (p *pauser) wait() { p.wg.Wait() }

// dumpHistory writes a failing history as porcupine's HTML visualization.
func dumpHistory(t *testing.T, ops []porcupine.Operation) {
	f, err := os.CreateTemp("", "fencetest-history-*.html")
	if err != nil {
		return
	}
	defer f.Close()
	_, info := porcupine.CheckOperationsVerbose(Model, ops, checkTimeout)
	if porcupine.Visualize(Model, info, f) == nil {
		t.Logf("history visualized in %s", f.Name())
	}
}

// linearizeChild is one worker: args are "id ops seed key,key,...".
func linearizeChild(ctx context.Context, conn *Conn, args string) int {
	f := strings.Fields(args)
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "linearize child: args %q\n", args)
		return 2
	}
	id, ops := f[0], atoi(f[1])
	seed, _ := strconv.ParseUint(f[2], 10, 64)
	keys := strings.Split(f[3], ",")
	r := rand.New(rand.NewPCG(seed, 1))
	out := bufio.NewWriter(os.Stdout)
	emit := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush() // one write(2) per event: a kill loses no reported call
	}
	seq := 0
	nextID := func() string { seq++; return id + "." + strconv.Itoa(seq) }
	old := map[string]uint64{} // a token of an earlier lease, per key

	write := func(key string, h fence.Holder, zombie bool) {
		cid := nextID()
		value := "p" + cid
		tag := "lease"
		if zombie {
			tag = "zombie"
		}
		emit("C %s %d %s w %d %s %s", cid, suitekit.Now(), key, h.Token(), value, tag)
		octx, cancel := context.WithTimeout(ctx, linOpTimeout)
		err := conn.Register.Write(octx, h, key, value)
		cancel()
		status := "ok"
		switch {
		case errors.Is(err, fence.ErrStale):
			status = "stale"
		case err != nil:
			status = "unknown"
		}
		emit("R %s %d %s", cid, suitekit.Now(), status)
	}
	read := func(key string) {
		cid := nextID()
		emit("C %s %d %s r", cid, suitekit.Now(), key)
		octx, cancel := context.WithTimeout(ctx, linOpTimeout)
		v, tok, err := conn.Register.Read(octx, key)
		cancel()
		if err != nil {
			emit("R %s %d fail", cid, suitekit.Now())
			return
		}
		emit("R %s %d ok =%s %d", cid, suitekit.Now(), v, tok)
	}

	for n, tries := 0, 0; n < ops && tries < 4*ops; tries++ {
		key := keys[r.IntN(len(keys))]
		if r.IntN(10) < 4 {
			read(key)
			n++
			continue
		}
		lease, err := conn.Locker.Acquire(ctx, key, lock.WithTTL(linTTL), lock.WithWait(2*time.Second))
		if err != nil {
			continue
		}
		for range 1 + r.IntN(3) {
			// No look at lease.Done(): like a holder paused at the wrong
			// moment, we write anyway, and the resource must decide.
			write(key, lease, false)
			n++
			time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
		}
		if t, ok := old[key]; ok && r.IntN(3) == 0 {
			write(key, fence.Token(t), true)
			n++
		}
		old[key] = lease.Token()
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = lease.Release(rctx)
		cancel()
	}
	return 0
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
