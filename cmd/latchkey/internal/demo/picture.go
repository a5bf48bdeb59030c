package demo

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// A picture is one run's timeline laid out for drawing: a lane per actor,
// time running left to right, a bar for each lock held (with its token), a
// band for each pause, a mark for each thing that happened.
type picture struct {
	Width, Height  int
	PlotX, PlotEnd int // where the time axis starts and ends
	Lanes          []lane
	Ticks          []tick
	Holds          []heldBar
	Pauses         []pause
	Marks          []stepMark
}

type lane struct {
	Name   string
	Y      int // its centre line
	LabelY int
}

type tick struct {
	X      float64
	Label  string
	Anchor string // the label's text-anchor: the last ends at its line
}

// A heldBar is a lock an actor held, from its acquisition to its release, its
// loss, its death or the end of the run.
type heldBar struct {
	Actor     string
	X, W      float64
	Y         int
	Token     string // shortened for the label
	FullToken uint64
	Title     string
}

// A pause is the time a worker spent frozen by SIGSTOP.
type pause struct {
	Actor string
	X, W  float64
	Y     int
	Title string
}

// A stepMark is one step: its shape follows from its class.
type stepMark struct {
	Actor string
	Kind  kind
	Class string // the shape: see markClass
	X     float64
	Y     int
	Title string
}

// The layout's measures, in SVG user units (pixels at 100%).
const (
	picWidth   = 600
	laneLabels = 118 // the lane names' column
	picRight   = 16
	laneHeight = 36
	axisHeight = 26
)

// markClass is how a kind of step is drawn: writes that landed and writes
// refused stand out; the protocol's own chatter stays small.
func markClass(k kind) string {
	switch k {
	case kindApplied, kindProcessed, kindSold:
		return "applied"
	case kindRefused, kindSoldOut:
		return "refused"
	case kindCharged:
		return "charged"
	case kindReplayed, kindDuplicate, kindSkipped, kindConflict, kindBusy:
		return "absorbed"
	case kindKilled:
		return "killed"
	case kindFailed, kindLost, kindNotHeld, kindTimeout:
		return "failed"
	default: // sent, read, acquired, released, answered
		return "minor"
	}
}

// holdEnds reports whether a step of the holder ends its hold.
func holdEnds(k kind) bool {
	return k == kindReleased || k == kindLost || k == kindNotHeld || k == kindKilled
}

// draw lays out steps on a time axis running to endMS.
func draw(steps []step, endMS int64) picture {
	lanes := laneNames(steps)
	p := picture{Width: picWidth, Height: axisHeight + laneHeight*len(lanes) + 8, PlotX: laneLabels, PlotEnd: picWidth - picRight}
	y := map[string]int{}
	for i, name := range lanes {
		c := axisHeight + laneHeight*i + laneHeight/2
		y[name] = c
		p.Lanes = append(p.Lanes, lane{Name: name, Y: c, LabelY: c + 4})
	}
	span, ticks := axis(endMS)
	plot := float64(picWidth - laneLabels - picRight)
	x := func(atMS int64) float64 { return math.Round(laneLabels + plot*float64(atMS)/float64(span)) }
	for i, t := range ticks {
		anchor := "middle"
		if i == len(ticks)-1 {
			anchor = "end"
		}
		p.Ticks = append(p.Ticks, tick{X: x(t), Label: fmt.Sprintf("%d ms", t), Anchor: anchor})
	}
	held := map[string]step{} // an actor's open hold, by its acquisition
	paused := map[string]step{}
	closeHold := func(actor string, atMS int64, why string) {
		a, ok := held[actor]
		if !ok {
			return
		}
		delete(held, actor)
		p.Holds = append(p.Holds, heldBar{Actor: actor, X: x(a.AtMS), W: max(x(atMS)-x(a.AtMS), 2), Y: y[actor],
			Token: shortToken(a.Token), FullToken: a.Token,
			Title: fmt.Sprintf("%s held the lock with token %d from %d ms to %d ms (%s)", actor, a.Token, a.AtMS, atMS, why)})
	}
	for _, s := range steps {
		on := s.Actor
		if s.On != "" {
			on = s.On
		}
		switch {
		case s.Kind == kindAcquired && s.Token != 0:
			closeHold(on, s.AtMS, "acquired again")
			held[on] = s
		case holdEnds(s.Kind):
			closeHold(on, s.AtMS, string(s.Kind))
		case s.Kind == kindPaused:
			paused[on] = s
		case s.Kind == kindResumed:
			if from, ok := paused[on]; ok {
				delete(paused, on)
				p.Pauses = append(p.Pauses, pause{Actor: on, X: x(from.AtMS), W: max(x(s.AtMS)-x(from.AtMS), 2), Y: y[on],
					Title: fmt.Sprintf("%s frozen by SIGSTOP from %d ms to %d ms", on, from.AtMS, s.AtMS)})
			}
		}
		if s.Kind == kindPaused || s.Kind == kindResumed {
			continue // drawn as the band
		}
		title := fmt.Sprintf("%d ms, %s: %s", s.AtMS, s.Actor, s.Event)
		if s.Count > 1 {
			title += fmt.Sprintf(" (%d alike)", s.Count)
		}
		p.Marks = append(p.Marks, stepMark{Actor: on, Kind: s.Kind, Class: markClass(s.Kind), X: x(s.AtMS), Y: y[on], Title: title})
	}
	for _, actor := range slices.Sorted(maps.Keys(held)) {
		closeHold(actor, endMS, "still held when the run ended")
	}
	for _, actor := range slices.Sorted(maps.Keys(paused)) {
		from := paused[actor]
		p.Pauses = append(p.Pauses, pause{Actor: actor, X: x(from.AtMS), W: max(x(endMS)-x(from.AtMS), 2), Y: y[actor],
			Title: fmt.Sprintf("%s frozen by SIGSTOP from %d ms to the end", actor, from.AtMS)})
	}
	return p
}

// laneNames are the actors in the order they first appear; the demo's own
// lane only if it did something besides signalling a worker.
func laneNames(steps []step) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, s := range steps {
		if s.On != "" {
			add(s.On)
			continue
		}
		add(s.Actor)
	}
	return names
}

// axis returns the time the axis spans, at least endMS, and its ticks, at
// a round step (1, 2 or 5 times a power of ten): at most seven.
func axis(endMS int64) (span int64, ticks []int64) {
	endMS = max(endMS, 1)
	step := int64(1)
	for mag := int64(1); endMS/step > 5; mag *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if step = m * mag; endMS/step <= 5 {
				break
			}
		}
	}
	span = (endMS + step - 1) / step * step
	for t := int64(0); t <= span; t += step {
		ticks = append(ticks, t)
	}
	return span, ticks
}

// shortToken is a token as a label: its last six digits, enough to tell the
// holders of one run apart (tokens follow the server's clock in µs).
func shortToken(t uint64) string {
	s := strconv.FormatUint(t, 10)
	if len(s) <= 7 {
		return s
	}
	return "…" + s[len(s)-6:]
}
