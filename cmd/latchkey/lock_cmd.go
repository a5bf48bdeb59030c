package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// defaultListLimit is how many locks "latchkey lock ls" lists without
// --limit.
const defaultListLimit = 100

const lockUsage = `usage: latchkey lock ls [--prefix P] [--kind K] [--limit N] [--cursor C] [flags]
       latchkey lock show KEY [--rw] [flags]
       latchkey lock break KEY [--token T | --holder LABEL | --all] [--yes] [--as NAME] [flags]

The operator's view of what is held on a backend: locks (an election's
term is one: its holder is the leader's value), read-write locks (latchkey
run --shared/--exclusive) and semaphores (latchkey run --permits). One name
is one resource, held in one of these kinds at a time.

  ls     lists what is held under keys that start with --prefix, one row per
         holder with its kind (lock, rw writer, rw reader, semaphore k/N),
         --kind lock, rw or semaphore for one kind (default all); at most
         --limit (default 100) per run, in pages: when there are more, the
         last line is the command for the next page
  show   shows how KEY is held: a lock's holder, fencing token, time left and
         waiters; a read-write lock's writer or readers; a semaphore's N and
         holders. --rw shows KEY's read-write lock even when it is free
  break  ends a hold whoever holds it, so the next waiter gets in: a lock; a
         read-write lock's or a semaphore's holder with --token T, those
         labelled --holder LABEL, or --all (the only holder needs none). The
         broken holder learns at its next renewal and, since every later
         token is higher, fenced writes refuse it. It prints what it broke
         and the state after. Asks on a terminal unless --yes; --as
         (default $USER, else the host) names who asked, in the log line

A time or count the backend does not record shows as "unknown". On
ZooKeeper a writer alone on a name has the node layout of kazoo's Lock and
is listed both as a lock and as a read-write lock's writer.

Exit status: 0; 1 if KEY is not held (show, break) or a break was declined;
69 if the backend could not be reached; 2 for usage errors.

Flags:
`

func lockCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	top := lockFlags("lock").fs
	top.Usage = func() { fmt.Fprint(top.Output(), lockUsage); top.PrintDefaults() }
	if code, done := topHelp(top, args, stdout, stderr); done {
		return code
	}
	sub, rest := args[0], args[1:]
	f := lockFlags("lock " + sub)
	switch sub {
	case "ls":
		f.fs.StringVar(&f.prefix, "prefix", "", "list only keys starting with this")
		f.fs.StringVar(&f.kind, "kind", kindAll, "list only this kind: lock, rw, semaphore, or all")
		f.fs.IntVar(&f.limit, "limit", defaultListLimit, "at most this many locks (1 to "+strconv.Itoa(lock.MaxListLimit)+")")
		f.fs.StringVar(&f.cursor, "cursor", "", "go on from where a page ended")
	case "show":
		f.fs.BoolVar(&f.rw, "rw", false, "show KEY's read-write lock (latchkey run --shared/--exclusive): writer, readers, waiting writers")
	case "break":
		f.fs.BoolVar(&f.yes, "yes", false, "break without asking")
		f.fs.Uint64Var(&f.token, "token", 0, "break the read-write lock's or semaphore's holder with this fencing token")
		f.fs.StringVar(&f.byHolder, "holder", "", "break the read-write lock's or semaphore's holders with this label")
		f.fs.BoolVar(&f.all, "all", false, "break every holder of the read-write lock or semaphore")
		f.fs.StringVar(&f.as, "as", defaultAsker(), "who asks for the break, for the log ($USER, else the host name)")
	default:
		fmt.Fprintf(stderr, "latchkey lock: unknown subcommand %q (ls, show or break)\n", sub)
		return exitUsage
	}
	f.fs.Usage = func() { fmt.Fprint(f.fs.Output(), lockUsage); f.fs.PrintDefaults() }
	names, code, ok := parseNamed(f.fs, rest, stdout, stderr)
	if !ok {
		return code
	}
	name := "latchkey lock " + sub
	key, err := f.check(sub, names)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	if f.rw {
		return rwShow(ctx, key, f, name, stdout, stderr)
	}
	locker, err := lockurl.Open(ctx, f.backend)
	if err != nil {
		return usageOrUnavailable(name, err, stderr, lock.ErrInvalid)
	}
	defer locker.Close()
	if !flagSet(f.fs, "backend") && os.Getenv(envBackend) == "" {
		fmt.Fprintf(stderr, "%s: no --backend: looking at latchkey run's SQLite file on this host (%s)\n", name, lockurl.Redact(f.backend))
	}
	v := &views{backend: f.backend}
	defer v.close()
	switch sub {
	case "ls":
		return lockLs(ctx, locker, v, f, name, stdout, stderr)
	case "show":
		return lockShow(ctx, locker, v, key, f, name, stdout, stderr)
	}
	return lockBreak(ctx, locker, v, key, f, name, stdout, stderr)
}

// check checks the names and flags given to lock sub, and returns the KEY
// of show and break.
func (f *lockFlagSet) check(sub string, names []string) (key string, err error) {
	switch {
	case sub == "ls" && len(names) > 0:
		return "", errors.New("takes no arguments (use --prefix)")
	case sub == "ls" && (f.limit < 1 || f.limit > lock.MaxListLimit):
		return "", fmt.Errorf("--limit must be 1 to %d", lock.MaxListLimit)
	case sub == "ls" && !slices.Contains([]string{kindAll, kindLock, kindRW, kindSemaphore}, f.kind):
		return "", fmt.Errorf("--kind must be lock, rw, semaphore or all, not %q", f.kind)
	case sub == "ls":
		return "", nil
	case sub == "break" && (f.all && (f.token != 0 || f.byHolder != "") || f.token != 0 && f.byHolder != ""):
		return "", errors.New("give one of --token, --holder and --all")
	case len(names) != 1:
		return "", fmt.Errorf("give exactly one KEY (got %d)", len(names))
	}
	return names[0], lock.CheckKey(names[0])
}

type lockFlagSet struct {
	fs       *flag.FlagSet
	backend  string
	json     bool
	prefix   string
	limit    int
	cursor   string
	yes      bool
	as       string
	rw       bool // show: the read-write lock
	kind     string
	token    uint64 // break: the holder with this token
	byHolder string // break: the holders with this label
	all      bool   // break: every holder
}

func lockFlags(name string) *lockFlagSet {
	f := &lockFlagSet{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	backendFlagVar(f.fs, &f.backend, "lock backend URL, as for latchkey run")
	f.fs.BoolVar(&f.json, "json", false, "print JSON")
	return f
}

// lockFailed reports a backend error and returns its exit status.
func lockFailed(name string, err error, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return exitUsage
	case errors.Is(err, lock.ErrNotHeld), errors.Is(err, lock.ErrUnsupported):
		return exitNotFound
	}
	return exitUnavailable
}

func lockLs(ctx context.Context, l lock.Locker, v *views, f *lockFlagSet, name string, stdout, stderr io.Writer) int {
	page, err := listKinds(ctx, l, v, f.kind, f.prefix, f.limit, f.cursor)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	for _, n := range page.notes {
		fmt.Fprintf(stderr, "%s: %s\n", name, n)
	}
	if f.json {
		writeJSON(stdout, toListingJSON(page))
		return exitOK
	}
	printListing(page, stdout)
	if page.cursor != "" {
		kind := ""
		if f.kind != kindAll {
			kind = " --kind " + f.kind
		}
		fmt.Fprintf(stdout, "more: latchkey lock ls --prefix %s%s --limit %d --cursor %s%s\n", strconv.Quote(f.prefix), kind, f.limit, page.cursor, backendArg(f.fs, f.backend))
	}
	return exitOK
}

// backendArg is the --backend a follow-up command needs to reach the same
// backend: none when it came from $LATCHKEY_BACKEND or the default, which
// the next command reads the same way; else the URL given, its password
// masked (a secret never goes to the terminal: type it in, or use the
// environment).
func backendArg(fs *flag.FlagSet, backend string) string {
	switch {
	case flagSet(fs, "backend-file"):
		return " --backend-file " + strconv.Quote(fs.Lookup("backend-file").Value.String())
	case !flagSet(fs, "backend"):
		return ""
	}
	return " --backend " + strconv.Quote(lockurl.Redact(backend))
}

// lockShow shows KEY as it is held: as a lock, a read-write lock or a
// semaphore; as a free lock when it is not held.
func lockShow(ctx context.Context, l lock.Locker, v *views, key string, f *lockFlagSet, name string, stdout, stderr io.Writer) int {
	kind, info, rw, sem, err := heldAs(ctx, l, v, key)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	switch kind {
	case kindRW:
		printRW(rw, f.json, stdout)
	case kindSemaphore:
		printSemaphore(sem, f.json, stdout)
	default:
		printLock(info, f.json, stdout)
	}
	if kind == "" {
		return exitNotFound
	}
	return exitOK
}

func lockBreak(ctx context.Context, l lock.Locker, v *views, key string, f *lockFlagSet, name string, stdout, stderr io.Writer) int {
	if f.as == "" {
		fmt.Fprintf(stderr, "%s: say who asks with --as NAME ($USER is not set)\n", name)
		return exitUsage
	}
	kind, info, rw, sem, err := heldAs(ctx, l, v, key)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	switch kind {
	case "":
		fmt.Fprintf(stderr, "%s: %q is not held; nothing broken\n", name, key)
		return exitNotFound
	case kindRW:
		return breakHolders(ctx, rwHoldersOf(v, rw), key, f, name, stdout, stderr)
	case kindSemaphore:
		return breakHolders(ctx, semHoldersOf(v, sem), key, f, name, stdout, stderr)
	}
	if f.token != 0 && f.token != info.Token || f.byHolder != "" && f.byHolder != info.Holder {
		fmt.Fprintf(stderr, "%s: %q is a lock held by %s with token %d, not the holder asked for; nothing broken\n", name, key, holderText(info.Holder), info.Token)
		return exitNotFound
	}
	if !f.yes {
		q := fmt.Sprintf("break %q, held by %s with token %d?", key, holderText(info.Holder), info.Token)
		if ok, code := mayChange(false, name, "break", "nothing broken", q, stderr); !ok {
			return code
		}
	}
	broken, err := lock.Break(ctx, l, key, f.as, nil)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	// The state after: free, or a waiter's already, with a higher token.
	after, afterErr := lock.Inspect(ctx, l, key)
	if f.json {
		j := brokenJSON{lockJSON: toLockJSON(broken), BrokenBy: f.as}
		if afterErr == nil {
			a := toLockJSON(after)
			j.After = &a
		}
		writeJSON(stdout, j)
		return exitOK
	}
	fmt.Fprintln(stdout, "broken:")
	printLock(broken, false, stdout)
	fmt.Fprintf(stdout, "broken by %s: the next holder's token will be above %d\n", f.as, broken.Token)
	if afterErr != nil {
		fmt.Fprintf(stderr, "%s: broken, but the state after could not be read: %v\n", name, afterErr)
		return exitOK
	}
	fmt.Fprintln(stdout, "now:")
	printLock(after, false, stdout)
	return exitOK
}

// brokenJSON is what lock break --json prints: the lock as it was, who
// broke it, and the lock as it is after the break.
type brokenJSON struct {
	lockJSON
	BrokenBy string    `json:"broken_by"`
	After    *lockJSON `json:"after,omitempty"`
}

func printLock(in lock.LockInfo, asJSON bool, w io.Writer) {
	if asJSON {
		writeJSON(w, toLockJSON(in))
		return
	}
	var f fields
	f.add("key", strconv.Quote(in.Key))
	if !in.Held {
		f.add("held", "no")
		if in.Waiting {
			f.add("waiters", waitersText(in))
		}
		f.print(w)
		return
	}
	f.add("held", "yes")
	f.add("holder", holderText(in.Holder))
	if in.Entry != "" {
		f.add("entry", in.Entry)
	}
	f.add("token", tokenText(in.Token))
	f.add("acquired", when(in.AcquiredAt, time.Now()))
	f.add("time left", timeLeftText(in.TimeLeft))
	f.add("waiters", waitersText(in))
	f.print(w)
}

// lockJSON is a lock as --json prints it; unknown values are omitted.
type lockJSON struct {
	Key        string `json:"key"`
	Held       bool   `json:"held"`
	Holder     string `json:"holder,omitempty"`
	Entry      string `json:"entry,omitempty"`
	Token      uint64 `json:"token,omitempty"`
	AcquiredAt string `json:"acquired_at,omitempty"`
	TimeLeftMS *int64 `json:"time_left_ms,omitempty"`
	Waiters    *int   `json:"waiters,omitempty"`
	Waiting    bool   `json:"waiting"`
}

func toLockJSON(in lock.LockInfo) lockJSON {
	j := lockJSON{Key: in.Key, Held: in.Held, Holder: in.Holder, Entry: in.Entry, Token: in.Token,
		AcquiredAt: jsonTime(in.AcquiredAt), Waiting: in.Waiting}
	if in.Held && in.TimeLeft != lock.Unknown {
		ms := in.TimeLeft.Milliseconds()
		j.TimeLeftMS = &ms
	}
	if in.Waiters != lock.Unknown {
		n := in.Waiters
		j.Waiters = &n
	}
	return j
}

func holderText(h string) string {
	if h == "" {
		return "(no label)"
	}
	return strconv.Quote(h)
}

func tokenText(t uint64) string {
	if t == 0 {
		return "unknown"
	}
	return strconv.FormatUint(t, 10)
}

func timeLeftText(d time.Duration) string {
	if d == lock.Unknown {
		return "unknown"
	}
	return d.Round(time.Millisecond).String()
}

func waitersText(in lock.LockInfo) string {
	switch {
	case in.Waiters != lock.Unknown:
		return strconv.Itoa(in.Waiters)
	case in.Waiting:
		return "some"
	}
	return "unknown"
}

// keyText is a key for a table cell: escaped like a Go string, without the
// quotes, so no byte of it can break the table.
func keyText(k string) string {
	q := strconv.Quote(k)
	return q[1 : len(q)-1]
}

// defaultAsker is who a break is logged as without --as: the user, or,
// where $USER is unset (cron, a container), the host.
func defaultAsker() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return "host " + h
	}
	return "unknown"
}
