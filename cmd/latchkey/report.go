package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// A report is what "latchkey demo --json" prints; the text report shows the
// same data.
type report struct {
	Backend    string      `json:"backend"` // lock URL, password masked
	DB         string      `json:"db"`      // the business data's database, password masked
	Store      string      `json:"store"`   // idempotency and dedup store
	OK         bool        `json:"ok"`      // no guarded run showed damage
	Sabotaged  bool        `json:"sabotaged,omitempty"`
	DurationMS int64       `json:"duration_ms"`
	Scenarios  []*scenario `json:"scenarios"`
}

// A scenario is one experiment, run twice: without the guard (the damage,
// expected and counted) and with it (none allowed).
type scenario struct {
	Name       string    `json:"name"`
	Title      string    `json:"title"`
	Guard      string    `json:"guard"` // what the guarded run relies on
	OK         bool      `json:"ok"`    // the guarded run showed no damage (true if skipped)
	Skipped    string    `json:"skipped,omitempty"`
	Error      string    `json:"error,omitempty"`
	Why        string    `json:"why"`
	DurationMS int64     `json:"duration_ms"`
	Damage     damage    `json:"damage"`
	Unguarded  any       `json:"unguarded,omitempty"`
	Guarded    any       `json:"guarded,omitempty"`
	Timeline   timelines `json:"timeline"`

	lines []string // the text report's summary
}

// damage is the harm each run did, counted in one unit per scenario. The
// demo's promise is Guarded == 0; Unguarded > 0 shows why the guard is there.
type damage struct {
	Unit      string `json:"unit"`
	Unguarded int    `json:"unguarded"`
	Guarded   int    `json:"guarded"`
}

// timelines are a scenario's runs, step by step.
type timelines struct {
	Unguarded []step `json:"unguarded,omitempty"`
	Guarded   []step `json:"guarded,omitempty"`
}

// A step is one thing that happened in a run: who did what, when. Repetitive
// steps are summarised into one with a Count.
type step struct {
	AtMS  int64  `json:"at_ms"` // since the run began
	Actor string `json:"actor"`
	// Kind is the step's class, for programs: sent, timeout, charged,
	// replayed, conflict, acquired, released, read, applied, refused, paused,
	// resumed, killed, lost, processed, failed, duplicate, skipped, sold,
	// sold-out, waited.
	Kind  string `json:"kind"`
	Event string `json:"event"` // for people
	Token uint64 `json:"token,omitempty"`
	Count int    `json:"count,omitempty"` // > 1: this many alike steps
}

// A timeline collects the steps of one run from the demo's goroutines and its
// workers' reports.
type timeline struct {
	began time.Time
	mu    sync.Mutex
	steps []step // guarded by mu
}

func newTimeline() *timeline { return &timeline{began: time.Now()} }

// add records a step at t.
func (tl *timeline) add(t time.Time, actor, kind, event string, token uint64) {
	tl.addN(t, actor, kind, event, token, 0)
}

func (tl *timeline) addN(t time.Time, actor, kind, event string, token uint64, n int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.steps = append(tl.steps, step{AtMS: max(ms(t.Sub(tl.began)), 0), Actor: actor, Kind: kind,
		Event: event, Token: token, Count: n})
}

// addUnix records a step a worker reported with a Unix-nanosecond time.
func (tl *timeline) addUnix(ns int64, actor, kind, event string, token uint64) {
	tl.add(time.Unix(0, ns), actor, kind, event, token)
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

func (s *scenario) say(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

// failed records an error that stopped the scenario; it counts as damage,
// since the guarded run could not show there was none.
func (s *scenario) failed(err error) *scenario {
	s.OK = false
	s.Error = err.Error()
	s.say("error: %v", err)
	return s
}

const (
	check = "✓"
	cross = "✗"
)

func mark(ok bool) string {
	if ok {
		return check
	}
	return cross
}

// expected marks damage in an unguarded run: it is the point, not a failure.
func expected(damaged bool) string {
	if damaged {
		return cross + " as expected"
	}
	return "(no damage this time: the race was not hit)"
}

func writeHeader(w io.Writer, r *report) {
	fmt.Fprintf(w, "latchkey demo\n  locks: %s\n  data:  %s\n  keys:  %s\n", r.Backend, r.DB, r.Store)
	if r.Sabotaged {
		fmt.Fprintln(w, "  SABOTAGED: every guard is broken on purpose; the demo must notice and exit 1")
	}
}

// textWidth is the longest line of the text report, in runes.
const textWidth = 100

func writeScenario(w io.Writer, n int, s *scenario) {
	fmt.Fprintf(w, "\n%d. %s\n", n, s.Title)
	if s.Guard != "" && s.Skipped == "" {
		wrap(w, "   guard: ", "          ", s.Guard)
	}
	for _, l := range s.lines {
		wrap(w, "   ", "   "+indent, l)
	}
	for _, run := range []struct {
		name  string
		steps []step
	}{{"unguarded", s.Timeline.Unguarded}, {"guarded", s.Timeline.Guarded}} {
		if len(run.steps) == 0 {
			continue
		}
		fmt.Fprintf(w, "   timeline, %s:\n", run.name)
		for _, st := range run.steps {
			head := fmt.Sprintf("   %7s  %-12s ", fmt.Sprintf("%d ms", st.AtMS), st.Actor)
			wrap(w, head, strings.Repeat(" ", utf8.RuneCountInString(head)+2), st.Event)
		}
	}
	if s.Why != "" {
		wrap(w, "   why: ", "        ", s.Why)
	}
}

// wrap writes text after first, breaking it at spaces into lines of at most
// textWidth runes; continuation lines start with cont.
func wrap(w io.Writer, first, cont, text string) {
	prefix := first
	for {
		room := textWidth - utf8.RuneCountInString(prefix)
		if utf8.RuneCountInString(text) <= room {
			fmt.Fprintf(w, "%s%s\n", prefix, text)
			return
		}
		cut := -1
		for i, r := range text {
			if utf8.RuneCountInString(text[:i]) > room {
				break
			}
			if r == ' ' {
				cut = i
			}
		}
		if cut <= 0 {
			fmt.Fprintf(w, "%s%s\n", prefix, text)
			return
		}
		fmt.Fprintf(w, "%s%s\n", prefix, text[:cut])
		text, prefix = strings.TrimLeft(text[cut:], " "), cont
	}
}

func writeFooter(w io.Writer, r *report) {
	bad := 0
	for _, s := range r.Scenarios {
		if !s.OK {
			bad++
		}
	}
	fmt.Fprintln(w)
	took := seconds(time.Duration(r.DurationMS) * time.Millisecond)
	if bad == 0 {
		fmt.Fprintf(w, "%s every guarded run was clean (%d scenarios, %s)\n", check, len(r.Scenarios), took)
		return
	}
	fmt.Fprintf(w, "%s %d of %d scenarios damaged WITH the guard (%s)\n", cross, bad, len(r.Scenarios), took)
}

// seconds formats d as "1.48 s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// indent is the width of "unguarded: ", for continuation lines.
var indent = strings.Repeat(" ", len("unguarded: "))
