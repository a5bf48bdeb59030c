package demo

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// A CommandLine is the demo's flags, defined on a FlagSet by Flags.
type CommandLine struct {
	// JSON is --json: print the report as one JSON document instead of
	// the text report as it goes.
	JSON bool
	// HTML is --html FILE: also write the report as one HTML page of
	// pictures, a timeline per run, to FILE.
	HTML string

	db, backend, only string
	sabotage          bool
}

// Flags defines the demo's flags on fs and sets fs.Usage to the demo's
// help.
func Flags(fs *flag.FlagSet) *CommandLine {
	c := &CommandLine{}
	fs.BoolVar(&c.JSON, "json", false, "print the report as one JSON document")
	fs.StringVar(&c.HTML, "html", "", "also write the report as an HTML page of timelines to FILE")
	fs.StringVar(&c.db, "db", "", "where the data and the idempotency keys live")
	fs.StringVar(&c.backend, "backend", "", "lock backend URL")
	fs.StringVar(&c.only, "only", "", "run only these scenarios")
	fs.BoolVar(&c.sabotage, "sabotage", false, "") // hidden: see Options.Sabotage
	fs.Usage = func() { usage(fs.Output()) }
	return c
}

// Options returns what the flags ask for. Call it after fs is parsed.
func (c *CommandLine) Options() Options {
	o := Options{DB: c.db, Backend: c.backend, Sabotage: c.sabotage}
	if c.only != "" {
		o.Only = strings.Split(c.only, ",")
	}
	return o
}

// helpWidth is the longest line of the help, for an 80-column terminal.
const helpWidth = 79

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: latchkey demo [--json] [--html FILE] [--db URL] [--backend URL]
                     [--only NAMES]

Runs the classic duplicate failures for real, with child processes on
loopback, and shows each one without its guard (the damage, counted) and with
it (none):

`)
	for i, s := range registry {
		menuEntry(w, i+1, s)
	}
	fmt.Fprint(w, `
Each scenario prints a timeline of who held what and which write was
refused. Exit status 1 if a guarded run shows damage, 130 if interrupted.

Flags:
  --json         print the report, timelines included, as one JSON document
  --html FILE    also write the report as one self-contained HTML page: each
                 run's timeline as a picture, a lane per instance, the locks
                 held with their tokens, each write applied or refused, each
                 pause and kill, the unguarded run beside the guarded one
  --db URL       the business data and the idempotency/dedup keys (1, 2):
                 a SQLite file (path or sqlite:///path), postgres://...,
                 mysql://user:pass@host:3306/db (MySQL 8.0, MariaDB 10.6), or
                 redis://... (keys in Redis, data in a temporary SQLite file).
                 Default: a new SQLite file in a temporary directory, removed
                 afterwards.
  --backend URL  the locks (3-6): sqlite:///path, postgres://, redis://,
                 redlock://, etcd://, zk:// or mem:// (one process only: the
                 scenarios with child processes are skipped). Default: the
                 --db database (SQLite, PostgreSQL or MySQL), or Redis for
                 redis://.
`)
	wrapAt(w, helpWidth, "  --only NAMES   ", strings.Repeat(" ", 17),
		"run only these scenarios, comma-separated: "+strings.Join(Names(), ", "))
}

// menuEntry writes scenario n's line of the help: what happens, wrapped,
// and its guard at the right margin.
func menuEntry(w io.Writer, n int, s *scenario) {
	guard := "guard: " + s.menuGuard
	lines := wrapLines(helpWidth, fmt.Sprintf("  %d. ", n), "     ", s.menu)
	last := lines[len(lines)-1]
	room := helpWidth - utf8.RuneCountInString(last) - utf8.RuneCountInString(guard)
	if room < 2 {
		last, room = "", helpWidth-utf8.RuneCountInString(guard)
		lines = append(lines, last)
	}
	lines[len(lines)-1] = last + strings.Repeat(" ", room) + guard
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
