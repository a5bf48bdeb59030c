package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// Exit status of "latchkey idem" and "latchkey dedup" besides exitOK,
// exitUsage and exitUnavailable: nothing found, or nothing forgotten (a
// request in progress without --force, a store that cannot forget, the
// confirmation declined).
const exitNotFound = 1

// maxShownBody caps the recorded body --body shows.
const maxShownBody = 4 << 10

// fields are the "name: value" lines of a report, printed aligned.
type fields [][2]string

func (f *fields) add(name, value string) { *f = append(*f, [2]string{name, value}) }

func (f fields) print(w io.Writer) {
	width := 0
	for _, kv := range f {
		width = max(width, len(kv[0]))
	}
	for _, kv := range f {
		fmt.Fprintf(w, "%-*s  %s\n", width+1, kv[0]+":", kv[1])
	}
}

// when shows t with how far it is from now, or "unknown".
func when(t, now time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	d := t.Sub(now).Round(time.Second)
	rel := (-d).String() + " ago"
	if d > 0 {
		rel = "in " + d.String()
	}
	return t.UTC().Format(time.RFC3339) + " (" + rel + ")"
}

// jsonTime is t for --json: RFC 3339, or "" when unknown (omitted).
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// shownBody is body as --body shows it: at most maxShownBody bytes, text
// when it is UTF-8, and how much was left out.
func shownBody(body []byte) (text string, left int) {
	if len(body) > maxShownBody {
		body, left = body[:maxShownBody], len(body)-maxShownBody
	}
	if !utf8.Valid(body) {
		return fmt.Sprintf("(%d bytes of binary data)", len(body)), left
	}
	return string(body), left
}

// stdinIsTerminal reports whether a person can answer a question on stdin:
// a character device other than /dev/null.
func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// confirm asks question on w and reads the answer from r: true only for
// "y" or "yes".
func confirm(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// showOrForget is "latchkey NAME show|forget ...", for idem and dedup: it
// runs sub for the subcommand. Bare, it prints usage and the flags that
// flags defines on stderr with status 2; asked for help, on stdout with
// status 0.
func showOrForget(ctx context.Context, name, usage string, flags func(out io.Writer) *flag.FlagSet,
	sub func(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int,
	args []string, stdout, stderr io.Writer) int {
	w, code := stderr, exitUsage
	if len(args) > 0 {
		switch args[0] {
		case "show", "forget":
			return sub(ctx, args[0], args[1:], stdout, stderr)
		case "-h", "-help", "--help", "help":
			w, code = stdout, exitOK
		default:
			fmt.Fprintf(stderr, "latchkey %s: unknown subcommand %q; use show or forget\n", name, args[0])
			return exitUsage
		}
	}
	io.WriteString(w, usage)
	flags(w).PrintDefaults()
	return code
}

// mayForget decides whether to go on with a forget: --yes, or a person's
// yes on a terminal. It returns the exit status to end with otherwise.
func mayForget(yes bool, cmd, question string, stderr io.Writer) (bool, int) {
	return mayChange(yes, cmd, "forget", "nothing forgotten", question, stderr)
}

// mayChange decides whether to go on with a change (verb: forget, break):
// --yes, or a person's yes on a terminal. It returns the exit status to end
// with otherwise, saying none (nothing forgotten, nothing broken).
func mayChange(yes bool, cmd, verb, none, question string, stderr io.Writer) (bool, int) {
	switch {
	case yes:
		return true, exitOK
	case !stdinIsTerminal():
		fmt.Fprintf(stderr, "%s: stdin is not a terminal to confirm on; add --yes to %s without asking\n", cmd, verb)
		return false, exitUsage
	case confirm(os.Stdin, stderr, question):
		return true, exitOK
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd, none)
	return false, exitNotFound
}

// A forgetting is the end of "idem forget" and "dedup forget", once the
// record was found and may be forgotten: ask on a terminal (unless --yes),
// forget, and say so.
type forgetting struct {
	cmd      string // the command, for messages
	what     string // the key or id forgotten, for the plain answer
	question string // asked on a terminal; "" asks nothing
	yes      bool
	asJSON   bool
	show     func(w io.Writer, asJSON bool)  // prints the record's report
	forget   func(ctx context.Context) error // the store's Forget
	failed   func(err error) int             // reports a failed Forget, returns the exit status
}

// run carries f out and returns the exit status.
func (f forgetting) run(ctx context.Context, stdout, stderr io.Writer, forgotten func()) int {
	if f.question != "" {
		if !f.asJSON && !f.yes {
			f.show(stderr, false)
		}
		if ok, code := mayForget(f.yes, f.cmd, f.question, stderr); !ok {
			return code
		}
	}
	fctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	err := f.forget(fctx)
	cancel()
	if err != nil {
		return f.failed(err)
	}
	forgotten()
	if f.asJSON {
		f.show(stdout, true)
	} else {
		fmt.Fprintf(stdout, "forgotten: %s\n", f.what)
	}
	return exitOK
}
