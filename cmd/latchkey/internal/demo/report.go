package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// A Report is what "latchkey demo --json" prints (WriteJSON); the text
// report shows the same data.
type Report struct {
	Backend    string    `json:"backend"` // lock URL, password masked
	DB         string    `json:"db"`      // the business data's database, password masked
	Store      string    `json:"store"`   // idempotency and dedup store
	OK         bool      `json:"ok"`      // no guarded run showed damage
	Sabotaged  bool      `json:"sabotaged,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Scenarios  []*Result `json:"scenarios"`
}

// A Result is what one scenario showed, run twice: without the guard (the
// damage, expected and counted) and with it (none allowed).
type Result struct {
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
	Kind  kind   `json:"kind"`  // for programs
	Event string `json:"event"` // for people
	Token uint64 `json:"token,omitempty"`
	Count int    `json:"count,omitempty"` // > 1: this many alike steps
	On    string `json:"on,omitempty"`    // the worker a signal went to
}

func (s *Result) say(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

// failed records an error that stopped the scenario; it counts as damage,
// since the guarded run could not show there was none.
func (s *Result) failed(err error) {
	s.OK = false
	s.Error = err.Error()
	s.say("error: %v", err)
}

// skip marks the scenario skipped, for the reason why.
func (s *Result) skip(why string) {
	s.Skipped = why
	s.say("skipped: %s", why)
}

// WriteJSON writes r as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
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

func writeHeader(w io.Writer, r *Report) {
	fmt.Fprintf(w, "latchkey demo\n  locks: %s\n  data:  %s\n  keys:  %s\n", r.Backend, r.DB, r.Store)
	if r.Sabotaged {
		fmt.Fprintln(w, "  SABOTAGED: every guard is broken on purpose; the demo must notice and exit 1")
	}
}

// textWidth is the longest line of the text report, in runes.
const textWidth = 100

func writeScenario(w io.Writer, n int, s *Result) {
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

// wrap writes text after first, broken into lines of at most textWidth
// runes; continuation lines start with cont.
func wrap(w io.Writer, first, cont, text string) { wrapAt(w, textWidth, first, cont, text) }

// wrapAt writes text after first, broken into lines of at most width runes.
func wrapAt(w io.Writer, width int, first, cont, text string) {
	for _, l := range wrapLines(width, first, cont, text) {
		fmt.Fprintln(w, l)
	}
}

// wrapLines breaks text at spaces into lines of at most width runes, the
// first starting with first and the others with cont. A word longer than a
// line stays whole.
func wrapLines(width int, first, cont, text string) []string {
	var lines []string
	prefix := first
	for {
		room := width - utf8.RuneCountInString(prefix)
		if utf8.RuneCountInString(text) <= room {
			return append(lines, prefix+text)
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
			return append(lines, prefix+text)
		}
		lines = append(lines, prefix+text[:cut])
		text, prefix = strings.TrimLeft(text[cut:], " "), cont
	}
}

func writeFooter(w io.Writer, r *Report) {
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
