package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/cmd/latchkey/internal/gateway"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/internal/backendurl"
)

// envIdemStore names the idempotency store "latchkey idem" opens by default.
const envIdemStore = "LATCHKEY_STORE"

// inspectTimeout bounds opening a store and each call on it.
const inspectTimeout = 15 * time.Second

const idemUsage = `usage: latchkey idem show|forget [flags]

Finds the idempotency record of one request, as the idemhttp middleware and
"latchkey gateway" keep it, by the parts the request had, and shows it
(show) or deletes it so the next request with that key runs (forget).

  latchkey idem show --store URL --principal P --method POST --route /payments --key k-1
  latchkey idem forget --store URL --scoped-key '4:http 65:p... 4:POST 10:=/payments 3:k-1' --yes

--principal is who the request acted for, as the middleware's principal
function returned it: "header:VALUE" for a gateway rule with
principal_header; for the default, the Authorization header, "authz-sha256:"
and the SHA-256 of the header's value in hex, as
  printf %s "$AUTHORIZATION" | sha256sum | cut -c1-64
prints it; "" (the default) for requests without one. --route is the
request's path (the default route) or what WithRoute returned. --scoped-key
takes the store's key instead, as it appears in logs or in the store.

The recorded response body is shown only with --body, at most 4 KiB. forget
refuses a request still in progress unless --force: forgetting it lets a
copy run beside it. On a terminal it asks first; --yes does not ask, and is
needed when stdin is not a terminal.

Exit status: 0 found (show) or forgotten (forget); 1 no record, or nothing
forgotten (in progress without --force, or not confirmed); 2 usage errors,
such as a bad key or URL (nothing was sent to the store); 69 the store could
not be reached.

Flags:
`

func defaultIdemStore() string {
	if s := os.Getenv(envIdemStore); s != "" {
		return s
	}
	return gateway.DefaultStore()
}

func idemCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := func(w io.Writer) *flag.FlagSet { return newIdemFlags("idem", w).fs }
	return showOrForget(ctx, "idem", idemUsage, flags, idemSub, args, stdout, stderr)
}

type idemFlags struct {
	fs                                           *flag.FlagSet
	store, principal, method, route, key, scoped *string
	asJSON, body, yes, force                     *bool
}

func newIdemFlags(name string, stderr io.Writer) *idemFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &idemFlags{
		fs: fs,
		store: fs.String("store", defaultIdemStore(),
			"idempotency store URL, as for the gateway: sqlite:///path, postgres://..., redis://host:port[?prefix=P], redis-cluster://..., mem:// ($"+envIdemStore+"; default the gateway's)"),
		principal: fs.String("principal", "", `the request's principal, unhashed: "header:VALUE", "authz-sha256:HEX", or "" for none`),
		method:    fs.String("method", http.MethodPost, "the request's method"),
		route:     fs.String("route", "", "the request's route: its path, such as /payments, unless the service sets another"),
		key:       fs.String("key", "", "the client's Idempotency-Key, unquoted"),
		scoped:    fs.String("scoped-key", "", "the store's key itself, instead of --principal, --method, --route and --key"),
		asJSON:    fs.Bool("json", false, "print JSON"),
		body:      fs.Bool("body", false, "show the recorded response body (at most 4 KiB)"),
		yes:       fs.Bool("yes", false, "forget: do not ask for confirmation"),
		force:     fs.Bool("force", false, "forget: forget a request still in progress too"),
	}
}

// scopedKey is the store key the flags name, or a usage error.
func (f *idemFlags) scopedKey() (string, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["scoped-key"] {
		for _, n := range []string{"principal", "method", "route", "key"} {
			if set[n] {
				return "", fmt.Errorf("--scoped-key names the record alone; leave out --%s", n)
			}
		}
		return *f.scoped, idem.CheckKey(*f.scoped)
	}
	switch {
	case !set["key"]:
		return "", errors.New("--key (with --route) or --scoped-key is required")
	case *f.route == "":
		return "", errors.New("--route is required with --key: the request's path, such as /payments")
	}
	return idemhttp.StoreKey(*f.principal, *f.method, *f.route, *f.key)
}

// idemReport is a record as show and forget print it with --json.
type idemReport struct {
	Store       string      `json:"store"`
	Key         string      `json:"key"`
	Found       bool        `json:"found"`
	Forgotten   bool        `json:"forgotten,omitempty"`
	State       string      `json:"state,omitempty"`
	Fingerprint string      `json:"fingerprint,omitempty"`
	Size        *int        `json:"size,omitempty"`
	Status      int         `json:"status,omitempty"`
	Header      http.Header `json:"header,omitempty"`
	BodyOmitted bool        `json:"body_omitted,omitempty"`
	Created     string      `json:"created,omitempty"`
	Expires     string      `json:"expires,omitempty"`
	Deadline    string      `json:"deadline,omitempty"`
	Body        *string     `json:"body,omitempty"`
	BodyLeft    int         `json:"body_left_out,omitempty"`
}

func idemSub(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	cmd := "latchkey idem " + sub
	f := newIdemFlags(sub, stderr)
	f.fs.Usage = func() { io.WriteString(f.fs.Output(), idemUsage); f.fs.PrintDefaults() }
	if code, ok := parseFlags(f.fs, args, stdout, stderr); !ok {
		return code
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", cmd, f.fs.Arg(0))
		return exitUsage
	}
	if sub == "show" && (*f.yes || *f.force) {
		fmt.Fprintf(stderr, "%s: --yes and --force are for forget\n", cmd)
		return exitUsage
	}
	key, err := f.scopedKey()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitUsage
	}
	in, closeStore, code := openIdemInspector(ctx, cmd, *f.store, stderr)
	if in == nil {
		return code
	}
	defer closeStore()

	rep := idemReport{Store: idemurl.Redact(*f.store), Key: key}
	lctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	rec, err := in.Lookup(lctx, key)
	cancel()
	if err != nil {
		return idemFailed(cmd, err, rep, *f.asJSON, stdout, stderr)
	}
	rep.fill(rec, *f.body)
	if sub == "show" {
		rep.print(stdout, *f.asJSON)
		return exitOK
	}

	if rec.State == idem.InProgress && !*f.force {
		return idemFailed(cmd, &idem.InProgressError{RetryAfter: max(time.Until(rec.Expires), 0)}, rep, *f.asJSON, stdout, stderr)
	}
	question := fmt.Sprintf("Forget this %s record? The next request with this key will run again.", rec.State)
	if rec.State == idem.InProgress {
		question = "Forget this record of a request still in progress? A copy may run beside it."
	}
	return forgetting{
		cmd: cmd, what: key, question: question, yes: *f.yes, asJSON: *f.asJSON,
		show:   func(w io.Writer, asJSON bool) { rep.print(w, asJSON) },
		forget: func(ctx context.Context) error { return in.Forget(ctx, key, *f.force) },
		failed: func(err error) int { return idemFailed(cmd, err, rep, *f.asJSON, stdout, stderr) },
	}.run(ctx, stdout, stderr, func() { rep.Forgotten = true })
}

// openIdemInspector opens the store rawURL names. A sqlite:// file that
// does not exist is refused rather than created.
func openIdemInspector(ctx context.Context, cmd, rawURL string, stderr io.Writer) (idem.Inspector, func(), int) {
	if u, err := url.Parse(rawURL); err == nil && u.Scheme == "sqlite" {
		if path, err := backendurl.SQLitePath(u); err == nil {
			if _, err := os.Stat(path); err != nil {
				fmt.Fprintf(stderr, "%s: %s: no store there (%v); nothing was created\n", cmd, idemurl.Redact(rawURL), errors.Unwrap(err))
				return nil, nil, exitUsage
			}
		}
	}
	octx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	st, err := idemurl.Open(octx, rawURL)
	if err != nil {
		return nil, nil, usageOrUnavailable(cmd, err, stderr, idem.ErrInvalid)
	}
	in, ok := st.(idem.Inspector)
	if !ok {
		_ = st.Close()
		fmt.Fprintf(stderr, "%s: the store at %s cannot be inspected\n", cmd, idemurl.Redact(rawURL))
		return nil, nil, exitUsage
	}
	return in, func() { _ = st.Close() }, exitOK
}

// idemFailed reports a Lookup or Forget that did not succeed and returns
// the exit status.
func idemFailed(cmd string, err error, rep idemReport, asJSON bool, stdout, stderr io.Writer) int {
	switch {
	case errors.Is(err, idem.ErrNotFound):
		idemReport{Store: rep.Store, Key: rep.Key}.print(stdout, asJSON)
		fmt.Fprintf(stderr, "%s: no record for this key: the next request with it runs\n", cmd)
		return exitNotFound
	case errors.Is(err, idem.ErrInProgress):
		if asJSON {
			rep.print(stdout, true)
		}
		fmt.Fprintf(stderr, "%s: not forgotten: %v; add --force to forget it anyway (a copy may then run beside it)\n", cmd, err)
		return exitNotFound
	}
	return usageOrUnavailable(cmd, err, stderr, idem.ErrInvalidKey, idem.ErrInvalid)
}

// fill sets what rec says; the body only when asked.
func (r *idemReport) fill(rec idem.Record, withBody bool) {
	r.Found = true
	r.State = rec.State.String()
	r.Fingerprint = rec.Fingerprint
	r.Created = jsonTime(rec.Created)
	if rec.State == idem.InProgress {
		r.Deadline = jsonTime(rec.Expires)
		return
	}
	r.Expires = jsonTime(rec.Expires)
	size := len(rec.Result)
	r.Size = &size
	resp, err := idemhttp.ReadRecorded(rec.Result)
	if err != nil {
		return // not recorded by the middleware
	}
	r.Status, r.Header, r.BodyOmitted = resp.Status, resp.Header, resp.BodyOmitted
	if withBody && !resp.BodyOmitted {
		b, left := shownBody(resp.Body)
		r.Body, r.BodyLeft = &b, left
	}
}

func (r idemReport) print(w io.Writer, asJSON bool) {
	if asJSON {
		writeJSON(w, r)
		return
	}
	now := time.Now()
	var f fields
	f.add("store", r.Store)
	f.add("key", r.Key)
	if !r.Found {
		f.add("state", "no record")
		f.print(w)
		return
	}
	f.add("state", r.State)
	if r.Size != nil {
		switch {
		case r.Status == 0:
			f.add("status", "(not an HTTP response)")
		case r.BodyOmitted:
			f.add("status", strconv.Itoa(r.Status)+" "+http.StatusText(r.Status)+" (body over the cap, not kept: copies get 500)")
		default:
			f.add("status", strconv.Itoa(r.Status)+" "+http.StatusText(r.Status))
		}
		f.add("size", strconv.Itoa(*r.Size)+" bytes")
	}
	f.add("fingerprint", r.Fingerprint)
	f.add("created", when(parseJSONTime(r.Created), now))
	if r.State == idem.InProgress.String() {
		f.add("deadline", when(parseJSONTime(r.Deadline), now))
	} else {
		f.add("expires", when(parseJSONTime(r.Expires), now))
	}
	if r.Body != nil {
		b := *r.Body
		if r.BodyLeft > 0 {
			b += fmt.Sprintf(" ... (%d more bytes)", r.BodyLeft)
		}
		f.add("body", b)
	}
	f.print(w)
}

func parseJSONTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
