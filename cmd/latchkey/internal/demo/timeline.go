package demo

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// A timeline collects the steps of one run from the demo's goroutines and its
// workers' reports.
type timeline struct {
	began time.Time
	mu    sync.Mutex
	steps []step // guarded by mu
}

func newTimeline() *timeline { return &timeline{began: time.Now()} }

// add records a step at t: actor did text, of kind k.
func (tl *timeline) add(t time.Time, actor string, k kind, text string, token uint64) {
	tl.addN(t, actor, k, text, token, 0)
}

// addN records n alike steps as one.
func (tl *timeline) addN(t time.Time, actor string, k kind, text string, token uint64, n int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.steps = append(tl.steps, step{AtMS: max(ms(t.Sub(tl.began)), 0), Actor: actor, Kind: k,
		Event: text, Token: token, Count: n})
}

// signal records the demo signalling the worker named on (a pause, a
// resume, a kill) at t.
func (tl *timeline) signal(t time.Time, k kind, on, text string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.steps = append(tl.steps, step{AtMS: max(ms(t.Sub(tl.began)), 0), Actor: "demo", Kind: k, Event: text, On: on})
}

// event records what a worker reported, as actor did text: the event's
// time, kind and token.
func (tl *timeline) event(actor string, ev event, text string) {
	tl.add(ev.time(), actor, ev.Kind, text, ev.Token)
}

// sorted returns the steps in time order (stable: steps of one instant keep
// the order they were added in).
func (tl *timeline) sorted() []step {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	s := slices.Clone(tl.steps)
	slices.SortStableFunc(s, func(a, b step) int { return cmp.Compare(a.AtMS, b.AtMS) })
	return s
}
