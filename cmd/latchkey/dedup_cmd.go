package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/dedupurl"
)

// envDedupStore names the dedup store "latchkey dedup" opens by default.
const envDedupStore = "LATCHKEY_DEDUP_STORE"

const dedupUsage = `usage: latchkey dedup show|forget --store URL [flags] MESSAGE-ID

Shows whether a message id is marked as processed (show), or deletes the
mark so the next copy of the message is processed (forget).

Store URLs:
  redis://host:6379[/db][?prefix=P]          dedup/redisstore (prefix default "dedup:"); rediss://, redis-cluster://
  redis://host:6379?bloom=NAME&capacity=N&rate=R[&period=24h][&prefix=bloom:]
                                             a dedup/bloomfilter filter, sized as its consumers size it
  postgres://user@host/db[?table=T]          the dedup/sqlinbox table (default dedup_inbox)
  sqlite:///path/inbox.db[?table=T]          the same in an existing SQLite file
  mem://                                     an empty store, to try the command on
The inbox URLs also take retention=D (default 24h), for when a mark may be
purged.

A Bloom filter answers "maybe seen", with how far to trust it, or "not
seen"; it cannot forget an id. The transactional inbox sees only committed
ids: a message being processed reads as no mark. forget refuses a claim in
progress unless --force. On a terminal it asks first; --yes does not ask,
and is needed when stdin is not a terminal.

Exit status: 0 found (show) or forgotten (forget); 1 no mark, or nothing
forgotten (in progress without --force, a Bloom filter, or not confirmed);
2 usage errors, such as a bad id or URL (nothing was sent to the store); 69
the store could not be reached.

Flags:
`

func dedupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := func(w io.Writer) *flag.FlagSet { return newDedupFlags("dedup", w).fs }
	return showOrForget(ctx, "dedup", dedupUsage, flags, dedupSub, args, stdout, stderr)
}

type dedupFlags struct {
	fs                 *flag.FlagSet
	store              *string
	asJSON, yes, force *bool
}

func newDedupFlags(name string, out io.Writer) *dedupFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &dedupFlags{
		fs:     fs,
		store:  fs.String("store", os.Getenv(envDedupStore), "dedup store URL, see above ($"+envDedupStore+"; required)"),
		asJSON: fs.Bool("json", false, "print JSON"),
		yes:    fs.Bool("yes", false, "forget: do not ask for confirmation"),
		force:  fs.Bool("force", false, "forget: forget a claim in progress too"),
	}
}

// check checks the flags and the message ids parsed and returns the id.
func (f *dedupFlags) check(ids []string) (string, error) {
	switch {
	case *f.store == "":
		return "", errors.New("--store is required (or $" + envDedupStore + ")")
	case len(ids) != 1:
		return "", fmt.Errorf("one message id is needed, %d given", len(ids))
	}
	return ids[0], dedup.CheckID(ids[0])
}

// dedupReport is a mark as show and forget print it with --json.
type dedupReport struct {
	Store             string   `json:"store"`
	ID                string   `json:"id"`
	Found             bool     `json:"found"`
	Forgotten         bool     `json:"forgotten,omitempty"`
	State             string   `json:"state,omitempty"`
	Approximate       bool     `json:"approximate,omitempty"`
	FillRatio         *float64 `json:"fill_ratio,omitempty"`
	FalsePositiveRate *float64 `json:"false_positive_rate,omitempty"`
	Marked            string   `json:"marked,omitempty"`
	Expires           string   `json:"expires,omitempty"`
}

func dedupSub(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	cmd := "latchkey dedup " + sub
	f := newDedupFlags(sub, stderr)
	f.fs.Usage = func() { io.WriteString(f.fs.Output(), dedupUsage); f.fs.PrintDefaults() }
	ids, code, ok := parseNamed(f.fs, args, stdout, stderr)
	if !ok {
		return code
	}
	id, err := f.check(ids)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitUsage
	case sub == "show" && (*f.yes || *f.force):
		fmt.Fprintf(stderr, "%s: --yes and --force are for forget\n", cmd)
		return exitUsage
	}
	octx, cancel := context.WithTimeout(ctx, inspectTimeout)
	st, err := dedupurl.Open(octx, *f.store)
	cancel()
	if err != nil {
		return usageOrUnavailable(cmd, err, stderr, dedup.ErrInvalid)
	}
	defer st.Close()

	rep := dedupReport{Store: backendurl.Redact(*f.store), ID: id}
	lctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	m, err := st.Lookup(lctx, id)
	cancel()
	if err != nil {
		return dedupFailed(cmd, err, rep, *f.asJSON, stdout, stderr)
	}
	rep.fill(m)
	if sub == "show" {
		rep.print(stdout, *f.asJSON)
		return exitOK
	}
	if m.State == dedup.InProgress && !*f.force {
		return dedupFailed(cmd, &dedup.InProgressError{RetryAfter: max(time.Until(m.Expires), 0)}, rep, *f.asJSON, stdout, stderr)
	}
	question := "" // a Bloom filter refuses in Forget, before anyone is asked
	if !m.Approximate {
		question = "Forget this mark? The next copy of the message will be processed again."
		if m.State == dedup.InProgress {
			question = "Forget the claim of a message still being processed? A copy may be processed beside it."
		}
	}
	return forgetting{
		cmd: cmd, what: id, question: question, yes: *f.yes, asJSON: *f.asJSON,
		show:   func(w io.Writer, asJSON bool) { rep.print(w, asJSON) },
		forget: func(ctx context.Context) error { return st.Forget(ctx, id, *f.force) },
		failed: func(err error) int { return dedupFailed(cmd, err, rep, *f.asJSON, stdout, stderr) },
	}.run(ctx, stdout, stderr, func() { rep.Forgotten = true })
}

func dedupFailed(cmd string, err error, rep dedupReport, asJSON bool, stdout, stderr io.Writer) int {
	switch {
	case errors.Is(err, dedup.ErrNotFound):
		dedupReport{Store: rep.Store, ID: rep.ID}.print(stdout, asJSON)
		fmt.Fprintf(stderr, "%s: %v: the next copy of the message is processed\n", cmd, err)
		return exitNotFound
	case errors.Is(err, dedup.ErrInProgress):
		if asJSON {
			rep.print(stdout, true)
		}
		fmt.Fprintf(stderr, "%s: not forgotten: %v; add --force to forget it anyway (a copy may then be processed beside it)\n", cmd, err)
		return exitNotFound
	case errors.Is(err, dedup.ErrCannotForget):
		if asJSON {
			rep.print(stdout, true)
		}
		fmt.Fprintf(stderr, "%s: not forgotten: %v\n", cmd, err)
		return exitNotFound
	}
	return usageOrUnavailable(cmd, err, stderr, dedup.ErrInvalidID, dedup.ErrInvalid)
}

func (r *dedupReport) fill(m dedup.Mark) {
	r.Found = true
	r.State = m.State.String()
	if m.Approximate {
		r.State = "maybe seen"
		r.Approximate = true
		r.FillRatio, r.FalsePositiveRate = &m.FillRatio, &m.FalsePositiveRate
	}
	r.Marked, r.Expires = jsonTime(m.Marked), jsonTime(m.Expires)
}

func (r dedupReport) print(w io.Writer, asJSON bool) {
	if asJSON {
		writeJSON(w, r)
		return
	}
	now := time.Now()
	var f fields
	f.add("store", r.Store)
	f.add("id", r.ID)
	if !r.Found {
		f.add("state", "no mark")
		f.print(w)
		return
	}
	f.add("state", r.State)
	if r.Approximate {
		f.add("fill ratio", strconv.FormatFloat(*r.FillRatio, 'f', 4, 64))
		fp := "none: the filter is empty"
		if *r.FalsePositiveRate > 0 {
			fp = fmt.Sprintf("about 1 in %.0f never-seen ids reads as seen now", 1 / *r.FalsePositiveRate)
		}
		f.add("false positives", fp)
		f.print(w)
		return
	}
	if r.State == dedup.Done.String() {
		f.add("marked", when(parseJSONTime(r.Marked), now))
		f.add("expires", when(parseJSONTime(r.Expires), now))
	} else {
		f.add("claim ends", when(parseJSONTime(r.Expires), now))
	}
	f.print(w)
}
