package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// The kinds of held state "latchkey lock" sees on one backend: one name is
// one resource, held as a lock (an election's term is one), a read-write
// lock or a semaphore.
const (
	kindLock      = "lock"
	kindRW        = "rw"
	kindSemaphore = "semaphore"
	kindAll       = "all"
)

// kinds are the kinds in listing order, each with its letter in a cursor.
var kinds = []struct{ name, letter string }{{kindLock, "l"}, {kindRW, "r"}, {kindSemaphore, "s"}}

// views are a backend's read-write locks and semaphores, opened beside its
// locks when first needed (a held lock needs neither).
type views struct {
	backend string
	opened  bool
	rw      *lockurl.RWLocker   // nil where the backend has no read-write locks
	sems    *lockurl.Semaphores // nil where it has no semaphores
}

// open opens the read-write locks and the semaphores of v's backend, once.
// A backend without one of them leaves it nil; one that cannot be reached
// is an error.
func (v *views) open(ctx context.Context) error {
	if v.opened {
		return nil
	}
	v.opened = true
	rw, err := lockurl.OpenRW(ctx, v.backend)
	switch {
	case err == nil:
		v.rw = rw
	case !errors.Is(err, lock.ErrInvalid) && !errors.Is(err, lockurl.ErrUnsupported):
		return err
	}
	sems, err := lockurl.OpenSemaphores(ctx, v.backend)
	switch {
	case err == nil:
		v.sems = sems
	case !errors.Is(err, lock.ErrInvalid) && !errors.Is(err, lockurl.ErrUnsupported):
		return err
	}
	return nil
}

func (v *views) close() {
	if v.rw != nil {
		_ = v.rw.Close()
	}
	if v.sems != nil {
		_ = v.sems.Close()
	}
}

// listing is one page of "lock ls" across kinds.
type listing struct {
	locks  []lock.LockInfo
	rws    []rwlock.Info
	sems   []semaphore.Info
	cursor string
	notes  []string // kinds this backend cannot list
}

// listKinds lists up to limit held things of the kinds asked for (kindAll:
// every kind), from cursor: a kind's letter, ".", and that kind's own
// cursor ("" at first).
func listKinds(ctx context.Context, l lock.Locker, v *views, kind, prefix string, limit int, cursor string) (listing, error) {
	var out listing
	if kind != kindLock {
		if err := v.open(ctx); err != nil {
			return out, err
		}
	}
	start, inner := 0, ""
	if cursor != "" {
		letter, rest, ok := strings.Cut(cursor, ".")
		start = slices.IndexFunc(kinds, func(k struct{ name, letter string }) bool { return k.letter == letter })
		if !ok || start < 0 {
			return out, fmt.Errorf("%w: %q is not a cursor of lock ls", lock.ErrInvalid, cursor)
		}
		inner = rest
	}
	for i := start; i < len(kinds); i, inner = i+1, "" {
		k := kinds[i]
		room := limit - len(out.locks) - len(out.rws) - len(out.sems)
		if room == 0 {
			out.cursor = k.letter + "."
			return out, nil
		}
		if kind != kindAll && kind != k.name {
			continue
		}
		var next string
		var err error
		switch k.name {
		case kindLock:
			var p lock.LockPage
			p, err = lock.List(ctx, l, prefix, room, inner)
			out.locks, next = append(out.locks, p.Locks...), p.Cursor
		case kindRW:
			if v.rw == nil {
				continue
			}
			var p rwlock.Page
			p, err = v.rw.List(ctx, prefix, room, inner)
			out.rws, next = append(out.rws, p.RWLocks...), p.Cursor
		case kindSemaphore:
			if v.sems == nil {
				continue
			}
			var p semaphore.Page
			p, err = v.sems.List(ctx, prefix, room, inner)
			out.sems, next = append(out.sems, p.Semaphores...), p.Cursor
		}
		switch {
		case errors.Is(err, lock.ErrUnsupported):
			out.notes = append(out.notes, kindTitle(k.name)+" on this backend cannot be listed yet")
		case err != nil:
			return out, err
		case next != "":
			out.cursor = k.letter + "." + next
			return out, nil
		}
	}
	return out, nil
}

// kindTitle names a kind in a sentence.
func kindTitle(kind string) string {
	switch kind {
	case kindRW:
		return "read-write locks"
	case kindSemaphore:
		return "semaphores"
	}
	return "locks"
}

// printListing prints a listing as a table, one row per holder.
func printListing(in listing, w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tKEY\tHOLDER\tTOKEN\tTIME LEFT\tWAITERS")
	for _, l := range in.locks {
		fmt.Fprintf(tw, "lock\t%s\t%s\t%d\t%s\t%s\n", keyText(l.Key), holderText(l.Holder), l.Token, timeLeftText(l.TimeLeft), waitersText(l))
	}
	for _, r := range in.rws {
		waiting := strconv.Itoa(r.WritersWaiting) + " writer(s)"
		if r.Writer != nil {
			fmt.Fprintf(tw, "rw writer\t%s\t%s\t%d\t%s\t%s\n", keyText(r.Name), holderText(r.Writer.Label), r.Writer.Token, timeLeftText(r.Writer.TimeLeft), waiting)
		}
		for _, h := range r.Readers {
			fmt.Fprintf(tw, "rw reader\t%s\t%s\t%d\t%s\t%s\n", keyText(r.Name), holderText(h.Label), h.Token, timeLeftText(h.TimeLeft), waiting)
		}
	}
	for _, s := range in.sems {
		waiting := "none seen"
		if s.Waiting {
			waiting = "some"
		}
		for _, h := range s.Holders {
			fmt.Fprintf(tw, "semaphore %d/%d\t%s\t%s\t%d\t%s\t%s\n", h.Count, s.Permits, keyText(s.Name), holderText(h.Holder), h.Token, timeLeftText(h.TimeLeft), waiting)
		}
	}
	_ = tw.Flush()
}

// listingJSON is a listing as lock ls --json prints it.
type listingJSON struct {
	Locks      []lockJSON      `json:"locks"`
	RWLocks    []rwJSON        `json:"rw_locks"`
	Semaphores []semaphoreJSON `json:"semaphores"`
	Cursor     string          `json:"cursor,omitempty"`
}

func toListingJSON(in listing) listingJSON {
	j := listingJSON{Locks: []lockJSON{}, RWLocks: []rwJSON{}, Semaphores: []semaphoreJSON{}, Cursor: in.cursor}
	for _, l := range in.locks {
		j.Locks = append(j.Locks, toLockJSON(l))
	}
	for _, r := range in.rws {
		j.RWLocks = append(j.RWLocks, toRWJSON(r))
	}
	for _, s := range in.sems {
		j.Semaphores = append(j.Semaphores, toSemaphoreJSON(s))
	}
	return j
}

// heldAs finds how key is held: as a lock, a read-write lock or a
// semaphore (one name is one resource: at most one), or not at all
// (kind ""). The lock's state is returned in any case.
func heldAs(ctx context.Context, l lock.Locker, v *views, key string) (kind string, li lock.LockInfo, ri rwlock.Info, si semaphore.Info, err error) {
	li, err = lock.Inspect(ctx, l, key)
	if err != nil || li.Held {
		return kindLock, li, ri, si, err
	}
	if err = v.open(ctx); err != nil {
		return "", li, ri, si, err
	}
	if v.rw != nil {
		if ri, err = v.rw.Inspect(ctx, key); err != nil && !errors.Is(err, lock.ErrUnsupported) {
			return "", li, ri, si, err
		}
		if ri.Held() {
			return kindRW, li, ri, si, nil
		}
	}
	if v.sems != nil && semaphore.CheckName(key) == nil {
		if si, err = v.sems.Inspect(ctx, key); err != nil && !errors.Is(err, lock.ErrUnsupported) {
			return "", li, ri, si, err
		}
		if len(si.Holders) > 0 {
			return kindSemaphore, li, ri, si, nil
		}
	}
	return "", li, ri, si, nil
}

// A chosen holder is one a break of a read-write lock or a semaphore ends.
type chosen struct {
	label string
	token uint64
	what  string // "writer", "reader", "2 of 3 permits"
}

// choose picks the holders a break ends: the one with --token, those with
// --holder's label, or all with --all; with none of these, the only holder,
// if there is one. It returns a usage message when the choice is not clear.
func choose(all []chosen, f *lockFlagSet) ([]chosen, string) {
	var out []chosen
	for _, c := range all {
		switch {
		case f.all,
			f.token != 0 && c.token == f.token,
			f.byHolder != "" && c.label == f.byHolder,
			f.token == 0 && f.byHolder == "" && len(all) == 1:
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	var b strings.Builder
	switch {
	case f.token != 0:
		fmt.Fprintf(&b, "no holder has token %d; the holders are:", f.token)
	case f.byHolder != "":
		fmt.Fprintf(&b, "no holder is labelled %q; the holders are:", f.byHolder)
	default:
		b.WriteString("it has several holders: give --token T, --holder LABEL or --all; the holders are:")
	}
	for _, c := range all {
		fmt.Fprintf(&b, "\n  %s, %s, token %d", holderText(c.label), c.what, c.token)
	}
	return nil, b.String()
}

// holdersOf is what lock break needs of a read-write lock or a semaphore:
// its holders, how to break one, and how to show it after.
type holdersOf struct {
	kind     string
	holders  []chosen
	breakOne func(ctx context.Context, key string, token uint64, who string) error
	// after reads the state after the break: as JSON, and printed.
	after func(ctx context.Context, key string) (asJSON any, print func(io.Writer), err error)
}

func rwHoldersOf(v *views, in rwlock.Info) holdersOf {
	h := holdersOf{kind: kindRW}
	if in.Writer != nil {
		h.holders = append(h.holders, chosen{label: in.Writer.Label, token: in.Writer.Token, what: "writer"})
	}
	for _, r := range in.Readers {
		h.holders = append(h.holders, chosen{label: r.Label, token: r.Token, what: "reader"})
	}
	h.breakOne = func(ctx context.Context, key string, token uint64, who string) error {
		_, _, err := v.rw.Break(ctx, key, token, who, nil)
		return err
	}
	h.after = func(ctx context.Context, key string) (any, func(io.Writer), error) {
		in, err := v.rw.Inspect(ctx, key)
		return toRWJSON(in), func(w io.Writer) { printRW(in, false, w) }, err
	}
	return h
}

func semHoldersOf(v *views, in semaphore.Info) holdersOf {
	h := holdersOf{kind: kindSemaphore}
	for _, x := range in.Holders {
		h.holders = append(h.holders, chosen{label: x.Holder, token: x.Token, what: fmt.Sprintf("%d of %d permits", x.Count, in.Permits)})
	}
	h.breakOne = func(ctx context.Context, key string, token uint64, who string) error {
		_, err := v.sems.Break(ctx, key, token, who, nil)
		return err
	}
	h.after = func(ctx context.Context, key string) (any, func(io.Writer), error) {
		in, err := v.sems.Inspect(ctx, key)
		return toSemaphoreJSON(in), func(w io.Writer) { printSemaphore(in, false, w) }, err
	}
	return h
}

// breakHolders is lock break of a read-write lock or a semaphore: it asks
// (unless --yes), breaks each chosen holder, and prints what it broke and
// the state after.
func breakHolders(ctx context.Context, h holdersOf, key string, f *lockFlagSet, name string, stdout, stderr io.Writer) int {
	what := strings.TrimSuffix(kindTitle(h.kind), "s")
	picked, why := choose(h.holders, f)
	if why != "" {
		fmt.Fprintf(stderr, "%s: %q is a %s; %s\n", name, key, what, why)
		return exitUsage
	}
	if !f.yes {
		var q strings.Builder
		fmt.Fprintf(&q, "break %d holder(s) of %s %q:", len(picked), what, key)
		for _, c := range picked {
			fmt.Fprintf(&q, " %s (%s, token %d)", holderText(c.label), c.what, c.token)
		}
		if ok, code := mayChange(false, name, "break", "nothing broken", q.String()+"?", stderr); !ok {
			return code
		}
	}
	var broken []chosen
	for _, c := range picked {
		if err := h.breakOne(ctx, key, c.token, f.as); err != nil {
			fmt.Fprintf(stderr, "%s: %s, token %d: %v\n", name, holderText(c.label), c.token, err)
			if !errors.Is(err, lock.ErrNotHeld) {
				return lockFailed(name, err, stderr)
			}
			continue
		}
		broken = append(broken, c)
	}
	if len(broken) == 0 {
		return exitNotFound
	}
	afterJSON, printAfter, afterErr := h.after(ctx, key)
	if f.json {
		j := brokenHoldersJSON{Kind: h.kind, Key: key, BrokenBy: f.as, Broken: []brokenHolderJSON{}}
		for _, c := range broken {
			j.Broken = append(j.Broken, brokenHolderJSON{Holder: c.label, Token: c.token, What: c.what})
		}
		if afterErr == nil {
			j.After = afterJSON
		}
		writeJSON(stdout, j)
		return exitOK
	}
	fmt.Fprintln(stdout, "broken:")
	var top uint64
	for _, c := range broken {
		fmt.Fprintf(stdout, "  %s, %s, token %d\n", holderText(c.label), c.what, c.token)
		top = max(top, c.token)
	}
	fmt.Fprintf(stdout, "broken by %s: every later token of %q will be above %d\n", f.as, key, top)
	if afterErr != nil {
		fmt.Fprintf(stderr, "%s: broken, but the state after could not be read: %v\n", name, afterErr)
		return exitOK
	}
	fmt.Fprintln(stdout, "now:")
	printAfter(stdout)
	return exitOK
}

// brokenHoldersJSON is what lock break --json prints for a read-write lock
// or a semaphore.
type brokenHoldersJSON struct {
	Kind     string             `json:"kind"`
	Key      string             `json:"key"`
	BrokenBy string             `json:"broken_by"`
	Broken   []brokenHolderJSON `json:"broken"`
	After    any                `json:"after,omitempty"`
}

type brokenHolderJSON struct {
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token"`
	What   string `json:"what"`
}
