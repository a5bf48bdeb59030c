package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// A report is what "latchkey demo --json" prints; the text report shows the
// same data.
type report struct {
	Backend    string      `json:"backend"` // lock URL, password masked
	DB         string      `json:"db"`      // SQLite file with the demo's data
	OK         bool        `json:"ok"`      // no guarded run showed damage
	Sabotaged  bool        `json:"sabotaged,omitempty"`
	DurationMS int64       `json:"duration_ms"`
	Scenarios  []*scenario `json:"scenarios"`
}

// A scenario is one experiment, usually run twice: without the lock (the
// damage, expected and counted) and with it (none allowed).
type scenario struct {
	Name       string `json:"name"`
	Title      string `json:"title"`
	OK         bool   `json:"ok"` // the guarded run showed no damage (true if skipped)
	Skipped    string `json:"skipped,omitempty"`
	Error      string `json:"error,omitempty"`
	Why        string `json:"why"`
	DurationMS int64  `json:"duration_ms"`
	Unguarded  any    `json:"unguarded,omitempty"`
	Guarded    any    `json:"guarded,omitempty"`

	lines []string // the text report's body
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
		return cross + " (expected: no lock)"
	}
	return "(no damage this time: the race was not hit)"
}

func writeHeader(w io.Writer, r *report) {
	fmt.Fprintf(w, "latchkey demo\n  locks: %s\n  data:  %s\n", r.Backend, r.DB)
	if r.Sabotaged {
		fmt.Fprintln(w, "  SABOTAGED: guarded runs use a private lock each, so nobody excludes anybody")
	}
}

func writeScenario(w io.Writer, n int, s *scenario) {
	fmt.Fprintf(w, "\n%d. %s\n", n, s.Title)
	for _, l := range s.lines {
		fmt.Fprintf(w, "   %s\n", l)
	}
	if s.Why != "" {
		fmt.Fprintf(w, "   why: %s\n", s.Why)
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
	fmt.Fprintf(w, "%s %d of %d scenarios damaged WITH the lock (%s)\n", cross, bad, len(r.Scenarios), took)
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
