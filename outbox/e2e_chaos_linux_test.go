//go:build linux

package outbox_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// chaos runs the two relay processes and strikes the leader: SIGKILL
// (the slot gets a new process) or SIGSTOP for 1.5 to 2.5 s, longer than
// the 1 s term, at random moments and whenever a relay says it is between
// publishing and marking.
type chaos struct {
	t      *testing.T
	config relayConfig
	lines  chan procLine
	procs  [2]*proc
	leader *proc

	kills, freezes, betweenKills, betweenFreezes int
	terms, fenced                                int
}

func newChaos(t *testing.T, c relayConfig) *chaos {
	ch := &chaos{t: t, config: c, lines: make(chan procLine, 4096)}
	for slot := range ch.procs {
		ch.start(slot)
	}
	return ch
}

func (c *chaos) start(slot int) {
	cfg := c.config
	cfg.Value = "relay-" + strings.Repeat("i", slot+1)
	c.procs[slot] = startProc(c.t, "relay", slot, cfg, c.lines)
}

func (c *chaos) strikes() int { return c.kills + c.freezes + c.betweenKills + c.betweenFreezes }

// enough reports whether the strikes made so far suffice: minStrikes at
// random moments and minBetween between publish and mark.
func (c *chaos) enough() bool {
	return c.kills+c.freezes >= minStrikes && c.betweenKills+c.betweenFreezes >= minBetween
}

// run strikes until the writers are done and enough strikes were made, or
// maxStrikes were, or the writers have been done for maxIdleTicks strike
// intervals, and returns what the writers did. Once the writers are done
// and minStrikes were made at random moments, it strikes only relays
// between publish and mark.
func (c *chaos) run(written <-chan writeResult) writeResult {
	var w *writeResult
	next := time.NewTimer(pause())
	defer next.Stop()
	for idle := 0; (w == nil || !c.enough()) && c.strikes() < maxStrikes && idle < maxIdleTicks; {
		select {
		case res := <-written:
			w = &res
			if res.err != nil {
				c.t.Fatal(res.err)
			}
		case l := <-c.lines:
			c.heard(l, true)
		case <-next.C:
			if w == nil || c.kills+c.freezes < minStrikes {
				c.strike(c.leader, false)
			}
			if w != nil {
				idle++
			}
			next.Reset(pause())
		}
	}
	if w == nil {
		res := <-written
		w = &res
	}
	return *w
}

// pause is the time between two strikes at random moments.
func pause() time.Duration { return 700*time.Millisecond + rand.N(800*time.Millisecond) }

// drain reads what the relays said since, without striking.
func (c *chaos) drain() {
	for {
		select {
		case l := <-c.lines:
			c.heard(l, false)
		default:
			return
		}
	}
}

// heard takes in a line of a relay; with strike, a relay between publish
// and mark is struck.
func (c *chaos) heard(l procLine, strike bool) {
	switch {
	case strings.HasPrefix(l.text, "leading "):
		c.terms++
		if c.procs[l.proc.slot] == l.proc {
			c.leader = l.proc
		}
	case l.text == "fenced":
		c.fenced++
	case strings.HasPrefix(l.text, "between ") && strike && c.procs[l.proc.slot] == l.proc:
		c.strike(l.proc, true)
	}
}

// strike kills or freezes p, or a relay at random if p is gone.
func (c *chaos) strike(p *proc, between bool) {
	if p == nil || c.procs[p.slot] != p {
		p = c.procs[rand.IntN(len(c.procs))]
	}
	if rand.IntN(2) == 0 {
		p.kill()
		c.start(p.slot)
		c.count(between, &c.betweenKills, &c.kills)
		return
	}
	p.freeze(1500*time.Millisecond + rand.N(time.Second))
	c.count(between, &c.betweenFreezes, &c.freezes)
}

func (c *chaos) count(between bool, ifBetween, otherwise *int) {
	if between {
		*ifBetween++
	} else {
		*otherwise++
	}
}
