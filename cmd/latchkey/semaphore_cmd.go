package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/semaphore"
)

const semaphoreUsage = `usage: latchkey semaphore show NAME [flags]

The operator's view of a semaphore (latchkey run --permits, package
semaphore): its permit count N as its holders agreed on it, and each holder
with its label, fencing token, permits and time left. Nothing is changed;
a holder that is stuck is cut off by revoking its permits in the backend
(see docs/semaphores-and-rwlocks.md), after which its fenced writes are refused.

A time the backend does not record shows as "unknown".

Exit status: 0; 1 if nobody holds a permit; 69 if the backend could not be
reached; 2 for usage errors.

Flags:
`

func semaphoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("semaphore show", flag.ContinueOnError)
	backend := backendFlag(fs, "backend URL, as for latchkey run")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(fs.Output(), semaphoreUsage); fs.PrintDefaults() }
	if code, done := topHelp(fs, args, stdout, stderr); done {
		return code
	}
	const name = "latchkey semaphore show"
	if args[0] != "show" {
		fmt.Fprintf(stderr, "latchkey semaphore: unknown subcommand %q (show)\n", args[0])
		return exitUsage
	}
	names, code, ok := parseNamed(fs, args[1:], stdout, stderr)
	if !ok {
		return code
	}
	if len(names) != 1 {
		fmt.Fprintf(stderr, "%s: give exactly one NAME (got %d)\n", name, len(names))
		return exitUsage
	}
	sem := names[0]
	if err := semaphore.CheckName(sem); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	sems, err := lockurl.OpenSemaphores(ctx, *backend)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	defer sems.Close()
	info, err := sems.Inspect(ctx, sem)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	printSemaphore(info, *asJSON, stdout)
	if len(info.Holders) == 0 {
		return exitNotFound
	}
	return exitOK
}

func printSemaphore(in semaphore.Info, asJSON bool, w io.Writer) {
	if asJSON {
		writeJSON(w, toSemaphoreJSON(in))
		return
	}
	var f fields
	f.add("name", strconv.Quote(in.Name))
	if len(in.Holders) == 0 {
		f.add("held", "no")
	} else {
		f.add("permits", fmt.Sprintf("%d, %d held by %d holder(s)", in.Permits, in.Used, len(in.Holders)))
	}
	f.add("last token", tokenText(in.LastToken))
	if in.Waiting {
		f.add("waiters", "some")
	}
	f.print(w)
	if len(in.Holders) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tTOKEN\tPERMITS\tTIME LEFT\tENTRY")
	for _, h := range in.Holders {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", holderText(h.Holder), h.Token, h.Count, timeLeftText(h.TimeLeft), keyText(h.Entry))
	}
	_ = tw.Flush()
}

// semaphoreJSON is a semaphore as --json prints it; unknown values are
// omitted.
type semaphoreJSON struct {
	Name      string       `json:"name"`
	Permits   int          `json:"permits,omitempty"`
	Used      int          `json:"used"`
	LastToken uint64       `json:"last_token,omitempty"`
	Waiting   bool         `json:"waiting"`
	Holders   []holderJSON `json:"holders"`
}

type holderJSON struct {
	Holder     string `json:"holder,omitempty"`
	Entry      string `json:"entry,omitempty"`
	Token      uint64 `json:"token"`
	Permits    int    `json:"permits"`
	TimeLeftMS *int64 `json:"time_left_ms,omitempty"`
}

func toSemaphoreJSON(in semaphore.Info) semaphoreJSON {
	j := semaphoreJSON{Name: in.Name, Permits: in.Permits, Used: in.Used, LastToken: in.LastToken, Waiting: in.Waiting, Holders: []holderJSON{}}
	for _, h := range in.Holders {
		hj := holderJSON{Holder: h.Holder, Entry: h.Entry, Token: h.Token, Permits: h.Count}
		if h.TimeLeft != lock.Unknown {
			ms := h.TimeLeft.Milliseconds()
			hj.TimeLeftMS = &ms
		}
		j.Holders = append(j.Holders, hj)
	}
	return j
}
