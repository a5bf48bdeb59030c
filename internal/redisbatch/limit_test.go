package redisbatch

import (
	"testing"
	"time"
)

// These tests drive the limit's rule with round trips chosen by the test:
// a real server cannot be made to answer in a chosen time, and the rule,
// not Redis, is under test. The Batcher's use of it is tested against Redis
// in redisbatch_test.go.

// feed observes sends round trips of rtt, each with as many sends in flight
// as the limit allows.
func feed(l *limit, sends int, rtt time.Duration, held bool) {
	for range sends {
		l.observe(rtt, l.n, held)
	}
}

func TestFixedLimitNeverMoves(t *testing.T) {
	l := fixedLimit(3)
	feed(&l, 1000, 100*time.Microsecond, true)
	feed(&l, 1000, 10*time.Millisecond, true)
	if l.n != 3 {
		t.Errorf("fixed limit of 3 moved to %d", l.n)
	}
	if l := fixedLimit(0); l.n != 1 {
		t.Errorf("fixed limit of 0 is %d sends, want 1", l.n)
	}
}

func TestLimitGrowsWhileRoundTripsStayShortAndCallsWait(t *testing.T) {
	l := adaptiveLimit()
	feed(&l, 10000, 200*time.Microsecond, true)
	if l.n != MaxSends {
		t.Errorf("round trips never grew, calls held back: limit %d, want %d", l.n, MaxSends)
	}
}

func TestLimitStaysWhileNobodyWaits(t *testing.T) {
	l := adaptiveLimit()
	feed(&l, 10000, 200*time.Microsecond, false)
	if l.n != MinSends {
		t.Errorf("no call was held back, yet the limit moved from %d to %d", MinSends, l.n)
	}
}

func TestLimitShrinksWhenRoundTripsGrow(t *testing.T) {
	l := adaptiveLimit()
	feed(&l, 10000, 100*time.Microsecond, true) // grows
	if l.n != MaxSends {
		t.Fatalf("limit %d did not grow to %d", l.n, MaxSends)
	}
	// Every send now takes ten times the round trip it needs: sends queue
	// for the CPU or behind each other. Within a few rounds the limit is
	// down to where no more than shrinkAbove sends can be waiting.
	feed(&l, 100, time.Millisecond, true)
	if l.n > shrinkAbove {
		t.Errorf("round trips ten times the least, limit still %d, want at most %d", l.n, shrinkAbove)
	}
}

func TestLimitFollowsAServerThatMoved(t *testing.T) {
	l := adaptiveLimit()
	feed(&l, 1000, 100*time.Microsecond, true)
	// A failover to a server ten times as far: every round trip is 1 ms,
	// none waits. Within two windows the least round trip is the new one,
	// and the limit grows again.
	feed(&l, 3*rttWindow, time.Millisecond, true)
	if l.minRTT != time.Millisecond {
		t.Errorf("least round trip %v after three windows of 1 ms, want 1ms", l.minRTT)
	}
	before := l.n
	feed(&l, 1000, time.Millisecond, true)
	if l.n <= before && l.n != MaxSends {
		t.Errorf("limit %d did not grow from %d at steady 1 ms round trips", l.n, before)
	}
}
