package lock

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestHolderLabel(t *testing.T) {
	f := newFake()
	m, _ := NewManager(f)
	ctx := context.Background()
	const label = "host-7 pid 4242 req 01HZX"
	l, err := m.Acquire(ctx, "k", WithHolder(label))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Holder() != label {
		t.Fatalf("Holder = %q, want %q", l.Holder(), label)
	}
	id, got, ok := ParseOwner(f.held["k"])
	if !ok || got != label || len(id) != 32 {
		t.Fatalf("ParseOwner(%q) = (%q, %q, %v), want the label back", f.held["k"], id, got, ok)
	}

	plain, err := m.Acquire(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release(ctx)
	if _, got, ok := ParseOwner(f.held["plain"]); !ok || got != "" || plain.Holder() != "" {
		t.Fatalf("no WithHolder: label %q, Holder %q, ok %v; want none", got, plain.Holder(), ok)
	}

	for _, bad := range []string{strings.Repeat("x", MaxHolderLen+1), "a\nb", "tab\there", "\xff"} {
		if _, err := m.Acquire(ctx, "bad", WithHolder(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("WithHolder(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, ok := f.held["bad"]; ok {
		t.Fatal("a bad label took the lock")
	}
	for _, other := range []string{"", "/lock/694d8a3c", strings.Repeat("A", 32), strings.Repeat("a", 32) + "x", strings.Repeat("a", 32) + " "} {
		if _, _, ok := ParseOwner(other); ok {
			t.Errorf("ParseOwner(%q) ok, want not an owner", other)
		}
	}
}

// TestOwnerIDsShareTheManagerHalf: every owner id a Manager makes starts
// with the same 16 hex digits, which another Manager's do not share, and
// the rest is each lease's own; ParseOwner reads them all.
func TestOwnerIDsShareTheManagerHalf(t *testing.T) {
	m1, _ := NewManager(newFake())
	m2, _ := NewManager(newFake())
	a, b, c := m1.newOwner(""), m1.newOwner("web-1"), m2.newOwner("")
	for _, o := range []string{a, b, c} {
		if _, _, ok := ParseOwner(o); !ok {
			t.Fatalf("ParseOwner(%q) refused", o)
		}
	}
	if a[:16] != b[:16] {
		t.Fatalf("one Manager's owners %q and %q differ in the first half", a, b)
	}
	if a[:16] == c[:16] {
		t.Fatalf("two Managers' owners %q and %q share the first half", a, c)
	}
	if a[16:32] == b[16:32] {
		t.Fatalf("two leases' owners %q and %q share the second half", a, b)
	}
	if id, label, _ := ParseOwner(b); id != b[:32] || label != "web-1" {
		t.Fatalf("ParseOwner(%q) = %q, %q", b, id, label)
	}
}
