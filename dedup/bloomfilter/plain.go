package bloomfilter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// margin is the part of a period, at its end, in which check-and-adds go
// through the script even when the last reply said the generation was
// younger: it covers the time that reply took, so that a plain add never
// lands in a generation older than its period (which would keep the id
// less than one period).
const margin = 8 // the last 1/margin of the period

// view is what a filter's last reply said of the current generation: until
// when plain commands may add to it, and how many ids it held. A stale
// view is safe: the keys the plain commands touch are fixed, so a rotation
// by another client between two replies only means this view is
// pessimistic about the age, or optimistic about the count by what was
// added meanwhile.
type view struct {
	mu     sync.Mutex
	until  time.Time // plain adds allowed before this local time
	gen    int64     // the current generation's number
	count  int64     // its count at the last reply, with this client's pending ids
	noPlan atomic.Bool
}

// pending are ids a client added to generation gen by plain commands and
// has not counted there yet.
type pending struct {
	mu     sync.Mutex
	gen, n int64
}

// take returns the pending ids and clears them.
func (p *pending) take() (gen, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gen, n, p.n = p.gen, p.n, 0
	return gen, n
}

// add records n ids added to generation gen and returns the ids pending
// for it. Ids pending for an earlier generation are dropped: that
// generation is no longer counted.
func (p *pending) add(gen, n int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen != p.gen {
		p.gen, p.n = gen, 0
	}
	p.n += n
	return p.n
}

// learn records a reply to a request sent at sent: the current generation
// was age old and held count ids. The age is measured on Redis's clock
// when the request ran, which is after sent: counting it from sent errs on
// the early side.
func (v *view) learn(sent time.Time, period, age time.Duration, gen, count int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.until = sent.Add(period - period/margin - age)
	v.gen, v.count = gen, count
}

// current returns the generation the view holds.
func (v *view) current() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// forget drops the view: the next step goes through the script.
func (v *view) forget() {
	v.mu.Lock()
	v.until = time.Time{}
	v.mu.Unlock()
}

// allows reports whether n more ids may be added by plain commands: the
// last eighth of a generation's capacity, and at least MaxChunk ids, are
// added by the script, which counts exactly. Until then a generation may
// hold more ids than the view says by what other clients added and have
// not counted yet (at most their last step's each).
func (v *view) allows(n, capacity int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return time.Now().Before(v.until) && v.count+n+max(capacity/margin, MaxChunk) <= capacity
}

// txPipeliner is the part of a go-redis client the plain commands need;
// every client of this module's Client list has it.
type txPipeliner interface {
	TxPipeline() redis.Pipeliner
}

// plain checks ids, and adds them if add is true, in one transaction of
// plain commands on the fixed keys of the two generations, when the view
// allows it: ok false means it sent nothing, or the answer must come from
// the script. A transaction cannot be split by a rotation, which runs as a
// script, so of concurrent adds of one new id exactly one finds a bit
// clear, whichever generations they ran against.
//
//	MULTI
//	BITFIELD_RO prev GET u1 p1 ... GET u1 pk   the previous generation's bits
//	BITFIELD cur SET u1 p1 1 ... SET u1 pk 1   set, replying the old bits
//	PTTL cur                                    its age: it expires two periods on
//	PEXPIRE cur 2*period NX                     a bitmap made here expires too
//	HINCRBY state c:<g> n                       count the ids the last step added
//	PEXPIRE state 2*period NX                   (these two only if there are some)
//	HMGET state m g c:<g>                       layout and sizing, generation, count
//	EXEC
//
// Test sends the two reads, PTTL and HMGET.
func (f *Filter) plain(ctx context.Context, add bool, ids []string) ([]bool, bool, error) {
	tx, ok := f.c.(txPipeliner)
	if !ok || f.view.noPlan.Load() {
		return nil, false, nil
	}
	n := int64(0) // ids this step may add
	if add {
		n = int64(len(ids))
	}
	if !f.view.allows(n, f.size.Capacity) {
		return nil, false, nil
	}
	state, cur := f.keys[0], f.keys[1]
	get, op := f.bitfields(add, ids)
	var pg, pn int64
	if add {
		pg, pn = f.pending.take()
	}
	g := f.view.current()
	gs := strconv.FormatInt(g, 10)
	sent := time.Now()
	p := tx.TxPipeline()
	prevBits := p.Do(ctx, get...)
	curBits := p.Do(ctx, op...)
	pttl := p.PTTL(ctx, cur)
	if add {
		p.Do(ctx, "PEXPIRE", cur, msec(2*f.period), "NX")
	}
	if pn > 0 {
		p.HIncrBy(ctx, state, "c:"+strconv.FormatInt(pg, 10), pn)
		p.Do(ctx, "PEXPIRE", state, msec(2*f.period), "NX")
	}
	st := p.HMGet(ctx, state, "m", "g", "c:"+gs)
	_, err := p.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		if strings.HasPrefix(err.Error(), "EXECABORT") {
			// A server without BITFIELD_RO or PEXPIRE NX (before Redis
			// 7.0) refused the transaction as a whole: nothing ran.
			f.view.noPlan.Store(true)
			f.pending.add(pg, pn)
			return nil, false, nil
		}
		if prevBits.Err() != nil || curBits.Err() != nil {
			return nil, false, err
		}
	}
	out, added, err := f.answers(prevBits, curBits, len(ids))
	if err != nil {
		return nil, false, err
	}
	sv := st.Val()
	tag, _ := sv[0].(string)
	stGen, _ := sv[1].(string)
	count, _ := sv[2].(string)
	if err := f.checkTag(tag); err != nil {
		return nil, false, err
	}
	if add {
		f.settle(plainState{tag: tag, gen: stGen, count: count, ttl: pttl.Val()}, g, sent, added)
	}
	return out, true, nil
}

// bitfields returns a plain step's two BITFIELD commands: the reads of the
// previous generation's bits for ids, and the reads (or, to add, the sets)
// of the current one's.
func (f *Filter) bitfields(add bool, ids []string) (get, op []any) {
	k := f.size.Hashes
	get = make([]any, 0, 2+3*k*len(ids))
	get = append(get, "BITFIELD_RO", f.keys[2])
	op = make([]any, 0, 7+4*k*len(ids))
	cmd, sub := "BITFIELD_RO", "GET"
	if add {
		cmd, sub = "BITFIELD", "SET"
	}
	op = append(op, cmd, f.keys[1])
	pos := make([]uint64, 0, k)
	for _, id := range ids {
		pos = positions(pos[:0], id, f.size.Bits, k)
		for _, p := range pos {
			get = append(get, "GET", "u1", p)
			op = append(op, sub, "u1", p)
			if add {
				op = append(op, 1)
			}
		}
	}
	return get, op
}

// answers reads which of n ids either generation has (out), and how many
// the current one lacked (added, if the step adds them).
func (f *Filter) answers(prevBits, curBits *redis.Cmd, n int) (out []bool, added int64, err error) {
	k := f.size.Hashes
	pb, err1 := prevBits.Int64Slice()
	cb, err2 := curBits.Int64Slice()
	if err := errors.Join(err1, err2); err != nil {
		return nil, 0, err
	}
	if len(pb) != k*n || len(cb) != k*n {
		return nil, 0, fmt.Errorf("bloomfilter: BITFIELD replied %d and %d values for %d ids", len(pb), len(cb), n)
	}
	out = make([]bool, n)
	for i := range out {
		inCur := all(cb[i*k : (i+1)*k])
		out[i] = inCur || all(pb[i*k:(i+1)*k])
		if !inCur {
			added++
		}
	}
	return out, added, nil
}

// checkTag checks the sizing the filter's state was made with. A state
// that is gone (deleted, or the server restarted empty) leaves the answer
// standing, the keys being fixed; the script makes the state again on the
// next step.
func (f *Filter) checkTag(tag string) error {
	switch tag {
	case f.tag:
		return nil
	case "":
		f.view.forget()
		return nil
	}
	f.view.forget()
	return fmt.Errorf("%w: the filter's state says m=%s, this client has m=%d k=%d",
		ErrSizingMismatch, strings.TrimPrefix(tag, "v2:"), f.size.Bits, f.size.Hashes)
}

// plainState is the filter's state as a plain step read it: its sizing
// tag, generation, the count of generation g, and the current bits' TTL.
type plainState struct {
	tag, gen, count string
	ttl             time.Duration
}

// settle counts the ids an adding step added in generation g, sent at
// sent, and updates the view from the state the step read.
func (f *Filter) settle(st plainState, g int64, sent time.Time, added int64) {
	got, err1 := strconv.ParseInt(st.gen, 10, 64)
	held, err2 := strconv.ParseInt(st.count, 10, 64)
	if st.count == "" {
		held, err2 = 0, nil
	}
	if st.tag != f.tag || err1 != nil || err2 != nil || got != g || st.ttl <= 0 {
		// Another generation, or a state this view cannot read: the ids
		// count for the generation the transaction ran against, and the
		// next step asks the script.
		if err1 == nil {
			f.pending.add(got, added)
		}
		f.view.forget()
		return
	}
	own := f.pending.add(g, added)
	f.view.learn(sent, f.period, 2*f.period-st.ttl, g, held+own)
}

// all reports whether every bit is set.
func all(bits []int64) bool {
	for _, b := range bits {
		if b == 0 {
			return false
		}
	}
	return true
}
