package redisbatch

import "time"

// Bounds of an adaptive Batcher's sends in flight.
const (
	// MinSends and MaxSends bound the sends an adaptive Batcher keeps in
	// flight at once: at least two, so that one pipeline fills while the
	// other is on its way.
	MinSends, MaxSends = 2, 64
	// rttWindow is how many sends the no-load round trip is the minimum of;
	// a window's minimum replaces the last, so the estimate follows a server
	// that moved (a failover, a new network path) within a window.
	rttWindow = 256
	// growBelow and shrinkAbove are Vegas's alpha and beta: how many sends
	// may wait, by the estimate, before the limit stops growing, and before
	// it shrinks. The least round trip is an extreme of a noisy sample, so
	// even sends that wait for nothing seem to wait a little.
	growBelow, shrinkAbove = 2, 4
)

// A limit decides how many sends a Batcher keeps in flight. A fixed limit
// never moves. An adaptive one follows the load as TCP Vegas does: it
// compares each send's round trip with the least seen lately (the round
// trip without queueing) and estimates how many of the sends in flight were
// only waiting: for CPU on either side, in socket buffers, behind other
// clients. While fewer than two wait and calls are held back, one more
// send may go; while more than four wait, only those that did not wait, and
// one more. So on a busy machine,
// where every send costs system calls the other side needs the CPU for,
// calls leave in fewer, larger pipelines; against a server far away, where
// a round trip is mostly the network's, more sends overlap. Its fields are
// guarded by the Batcher's mu.
type limit struct {
	n     int  // sends allowed in flight
	fixed bool // n never moves

	minRTT    time.Duration // the least round trip of the last full window
	windowMin time.Duration // the least round trip in the current window
	windowN   int           // sends observed in the current window
	srtt      time.Duration // the smoothed round trip
	sinceMove int           // sends observed since n last moved
}

// fixedLimit returns a limit of n sends, at least 1.
func fixedLimit(n int) limit { return limit{n: max(n, 1), fixed: true} }

// adaptiveLimit returns a limit that starts at MinSends and moves.
func adaptiveLimit() limit { return limit{n: MinSends} }

// observe takes one completed send: its round trip, how many sends were in
// flight when it left (itself included), and whether calls were held back
// by the limit when it came back.
func (l *limit) observe(rtt time.Duration, inFlight int, held bool) {
	if l.fixed || rtt <= 0 {
		return
	}
	if l.windowN == 0 || rtt < l.windowMin {
		l.windowMin = rtt
	}
	if l.windowN++; l.windowN == rttWindow {
		l.minRTT, l.windowN = l.windowMin, 0
	}
	if l.minRTT == 0 || rtt < l.minRTT {
		l.minRTT = rtt
	}
	if l.srtt == 0 {
		l.srtt = rtt
	} else {
		l.srtt += (rtt - l.srtt) / 8
	}
	// Move at most once per round of the sends in flight, so that a move
	// is judged by the round trips it caused.
	if l.sinceMove++; l.sinceMove < l.n {
		return
	}
	waiting := float64(inFlight) * (1 - float64(l.minRTT)/float64(l.srtt))
	switch {
	case waiting > shrinkAbove && l.n > MinSends:
		l.n = max(min(l.n-1, inFlight-int(waiting)+1), MinSends)
		l.sinceMove = 0
	case waiting < growBelow && held && l.n < MaxSends:
		l.n++
		l.sinceMove = 0
	}
}
