package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

const electUsage = `usage: latchkey elect --key NAME [--value V] [--again] [flags] -- command [args...]
       latchkey elect show NAME [--json] [flags]
       latchkey elect observe NAME [--json] [--changes N] [flags]

Leader election with fencing terms: of all the hosts running the same
"latchkey elect --key NAME -- command", one at a time leads and runs the
command (the outbox relay, the scheduler, the reconciliation job). The
command gets the term's fencing token in $LATCHKEY_FENCING_TOKEN (and the
name in $LATCHKEY_LOCK_KEY), strictly greater than every earlier leader's,
to hand to whatever it writes. When the term ends (the lease is lost) the
command gets SIGTERM, then SIGKILL after --grace; when the command ends, the
leader resigns and the next candidate takes over at once. With --again the
candidate campaigns again after each term instead of exiting. --value (or
--holder, as for run) says who leads (default: host name and pid); everyone
can read it.

If latchkey dies, even of SIGKILL, the command and every process it started
die with it (on Unix). A paused latchkey (SIGSTOP, a frozen VM) cannot stop
its command, which may write after the next leader took over: the term's
token is the guard, so have what the command writes refuse lower tokens.

  show      prints who leads NAME now: value, fencing token, since when
  observe   prints the leader now, then one line per change (a new term, a
            new value, no leader) until interrupted or --changes lines; when
            the backend has not confirmed the leader for a TTL (--ttl) it
            prints "leader unknown" with the reason, and the leader again
            once it answers

Exit status, as "latchkey run": the command's own; 128+N if it died of
signal N; 75 if not elected (--wait ran out); 76 if the term was lost while
the command ran; 69 if the backend failed; 127 if the command could not be
started; 2 for usage errors; 130 if interrupted (always, with --again).
show: 0, or 1 if nobody leads.

Flags:
`

func electCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "show" || args[0] == "observe") {
		return electWatch(ctx, args[0], args[1:], stdout, stderr)
	}
	const name = "latchkey elect"
	fs := flag.NewFlagSet("elect", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), electUsage); fs.PrintDefaults() }
	key := fs.String("key", "", "the election's name (required)")
	value := fs.String("value", defaultHolder(), "who leads, as others see it (and lock ls and show print): at most "+strconv.Itoa(elect.MaxValueLen)+" bytes, no secrets")
	fs.StringVar(value, "holder", *value, "the same as --value, the name run gives it")
	ttl := fs.Duration("ttl", lock.DefaultTTL, "term lease length: a dead leader is replaced after at most this long; renewed every ttl/3")
	wait := waitForever
	fs.Var(&wait, "wait", "how long to wait to be elected, a `duration`: 0 tries once, forever waits until interrupted")
	grace := fs.Duration("grace", 10*time.Second, "after a lost term, time between SIGTERM and SIGKILL")
	again := fs.Bool("again", false, "campaign again after each term instead of exiting")
	backend := backendFlag(fs, "lock backend URL: sqlite:///path, postgres://..., redis://host:port, etcd://..., zk://...")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	argv := fs.Args()
	switch {
	case *key == "":
		fmt.Fprintf(stderr, "%s: --key is required\n", name)
		return exitUsage
	case len(argv) == 0:
		fmt.Fprintf(stderr, "%s: no command given (write it after --)\n", name)
		return exitUsage
	case *grace < 0:
		fmt.Fprintf(stderr, "%s: --grace must not be negative\n", name)
		return exitUsage
	case flagSet(fs, "value") && flagSet(fs, "holder"):
		fmt.Fprintf(stderr, "%s: --holder and --value are one setting; give one\n", name)
		return exitUsage
	case *again && wait != waitForever:
		fmt.Fprintf(stderr, "%s: --again campaigns until interrupted; it takes no --wait\n", name)
		return exitUsage
	}
	if !flagSet(fs, "backend") && os.Getenv(envBackend) == "" {
		fmt.Fprintf(stderr, "%s: no --backend: the election is a SQLite file on this host and has candidates on this host only\n", name)
	}
	locker, e, code := openElection(ctx, name, *backend, *key, stderr, elect.WithTTL(*ttl))
	if e == nil {
		return code
	}
	defer locker.Close()

	// The last term's exit status; the function's error only tells Run
	// that the term failed, for its backoff.
	code = exitOK
	lead := func(_ context.Context, t *elect.Term) error {
		fmt.Fprintf(stderr, "%s: elected as %q with token %d\n", name, t.Value(), t.Token())
		code = supervise(t.Lease(), *key, argv, *grace, name, stderr)
		if code != exitOK {
			return fmt.Errorf("exit status %d", code)
		}
		return nil
	}
	if *again {
		err := e.Run(ctx, *value, lead, elect.Again(), elect.OnTermEnd(func(t *elect.Term, err error) {
			if t == nil && err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "%s: campaign: %v; trying again\n", name, err)
			}
		}))
		if errors.Is(err, lock.ErrInvalid) {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return exitUsage
		}
		return exitInterrupted
	}
	var opts []elect.CampaignOption
	if wait != waitForever {
		opts = append(opts, elect.WithWait(time.Duration(wait)))
	}
	t, err := e.Campaign(ctx, *value, opts...)
	var mode *lock.ModeError
	switch {
	case err == nil:
	case errors.As(err, &mode):
		fmt.Fprintf(stderr, "%s: %v; not running the command\n", name, mode)
		return exitNotAcquired
	case errors.Is(err, lock.ErrNotAcquired):
		fmt.Fprintf(stderr, "%s: someone else leads; not running the command\n", name)
		return exitNotAcquired
	case errors.Is(err, lock.ErrInvalid):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: interrupted while campaigning\n", name)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUnavailable
	}
	_ = lead(ctx, t)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Resign(rctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		fmt.Fprintf(stderr, "%s: resign: %v (the term ends after its TTL)\n", name, err)
	}
	return code
}

// defaultHolder is who holds a lock or leads without --holder or --value:
// the host name and pid.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return host + " pid " + strconv.Itoa(os.Getpid())
}

// openElection opens the backend and the election; on failure it reports
// and returns the exit status, with a nil Election.
func openElection(ctx context.Context, name, backend, key string, stderr io.Writer, opts ...elect.Option) (lockurl.Locker, *elect.Election, int) {
	if err := lock.CheckKey(key); err != nil {
		fmt.Fprintf(stderr, "%s: name: %v\n", name, err)
		return nil, nil, exitUsage
	}
	locker, err := lockurl.Open(ctx, backend)
	if err != nil {
		return nil, nil, usageOrUnavailable(name, err, stderr, lock.ErrInvalid)
	}
	e, err := elect.New(locker, key, opts...)
	if err != nil {
		locker.Close()
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, nil, exitUsage
	}
	return locker, e, exitOK
}

// electWatch is "elect show" and "elect observe".
func electWatch(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	name := "latchkey elect " + sub
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), electUsage); fs.PrintDefaults() }
	backend := backendFlag(fs, "lock backend URL, as for latchkey run")
	asJSON := fs.Bool("json", false, "print JSON (observe: one object per line)")
	changes := 0
	if sub == "observe" {
		fs.IntVar(&changes, "changes", 0, "exit after printing this many lines (0: until interrupted)")
	}
	names, code, ok := parseNamed(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	var key string
	switch {
	case len(names) != 1:
		fmt.Fprintf(stderr, "%s: give exactly one NAME (got %d)\n", name, len(names))
		return exitUsage
	case changes < 0:
		fmt.Fprintf(stderr, "%s: --changes must not be negative\n", name)
		return exitUsage
	}
	key = names[0]
	locker, e, code := openElection(ctx, name, *backend, key, stderr)
	if e == nil {
		return code
	}
	defer locker.Close()
	if sub == "show" {
		l, err := e.Leader(ctx)
		switch {
		case errors.Is(err, elect.ErrNoLeader):
		case err != nil:
			return lockFailed(name, err, stderr)
		}
		printLeader(stdout, key, l, *asJSON, false)
		if !l.Elected {
			return exitNotFound
		}
		return exitOK
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := e.Observe(octx)
	if err != nil {
		return lockFailed(name, err, stderr)
	}
	n := 0
	for l := range ch {
		printLeader(stdout, key, l, *asJSON, true)
		if n++; changes > 0 && n >= changes {
			cancel()
			for range ch {
			}
			return exitOK
		}
	}
	return exitInterrupted
}

// leaderJSON is a leader as --json prints it; unknown values are omitted.
type leaderJSON struct {
	Name    string `json:"name"`
	At      string `json:"at,omitempty"` // observe: when the change was seen
	Elected bool   `json:"elected"`
	Value   string `json:"value,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	Since   string `json:"since,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Unknown bool   `json:"unknown,omitempty"` // observe: the leader could not be confirmed for a TTL
	Error   string `json:"error,omitempty"`   // why, when unknown
}

// printLeader prints l: for observe (line) one line, else a report.
func printLeader(w io.Writer, key string, l elect.Leader, asJSON, line bool) {
	now := time.Now()
	if asJSON {
		j := leaderJSON{Name: key, Elected: l.Elected, Value: l.Value, Token: l.Token, Since: jsonTime(l.Since), Entry: l.Entry, Unknown: l.Unknown}
		if l.Err != nil {
			j.Error = l.Err.Error()
		}
		if line {
			j.At = jsonTime(now)
			b, _ := json.Marshal(j)
			fmt.Fprintf(w, "%s\n", b)
			return
		}
		writeJSON(w, j)
		return
	}
	if line {
		stamp := now.UTC().Format(time.RFC3339Nano)
		if l.Unknown {
			fmt.Fprintf(w, "%s leader unknown: %v\n", stamp, l.Err)
			return
		}
		if !l.Elected {
			fmt.Fprintf(w, "%s no leader\n", stamp)
			return
		}
		fmt.Fprintf(w, "%s leader %s token %s\n", stamp, strconv.Quote(l.Value), tokenText(l.Token))
		return
	}
	var f fields
	f.add("name", strconv.Quote(key))
	if !l.Elected {
		f.add("leader", "none")
		f.print(w)
		return
	}
	f.add("leader", strconv.Quote(l.Value))
	if l.Entry != "" {
		f.add("entry", l.Entry)
	}
	f.add("token", tokenText(l.Token))
	f.add("since", when(l.Since, now))
	f.print(w)
}
