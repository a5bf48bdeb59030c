package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/outbox"
)

// TestOutboxShow: show reads the pending count, the lag and the relay's
// term from a SQLite outbox, with its flags before or after the
// subcommand's, as text and as JSON; bad input is a usage error.
func TestOutboxShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db := testsvc.OpenDB(t, "sqlite", backendurl.SQLiteDSN(path), testsvc.MaxOpenConns(0))
	ob, err := outbox.New(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := ob.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	url := "sqlite://" + path
	code, out, errb := latchkey(t, "outbox", "show", "--db", url)
	if code != exitOK || !strings.Contains(out, "pending:") || !strings.Contains(out, "none has written yet") {
		t.Fatalf("empty outbox: exit %d\n%s%s", code, out, errb)
	}
	relayOne(t, db, ob)
	for i := range 3 {
		if _, err := ob.Add(ctx, db, outbox.Message{Topic: "payments", Key: "acct", Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errb = latchkey(t, "outbox", "show", "--json", "--db", url)
	var got outboxJSON
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s%s", code, err, out, errb)
	}
	if got.Pending != 3 || got.Published != 1 || got.Leader != "relay-1" || got.Token == 0 || got.OldestPending == "" {
		t.Fatalf("--json: %+v", got)
	}
	code, out, _ = latchkey(t, "outbox", "show", "--db", url, "--table", outbox.DefaultTable)
	if code != exitOK || !strings.Contains(out, "pending:         3") || !strings.Contains(out, `relay:           "relay-1"`) {
		t.Fatalf("flags after: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"outbox", "show"},
		{"outbox", "show", "--db", "redis://localhost"},
		{"outbox", "show", "--db", url, "extra"},
		{"outbox", "show", "--db", "sqlite://" + filepath.Join(t.TempDir(), "missing.db")},
		{"outbox", "list"},
	} {
		if code, _, _ := latchkey(t, bad...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", bad, code, exitUsage)
		}
	}
	if code, _, _ := latchkey(t, "outbox", "show", "--db", url, "--table", "other"); code != exitFail {
		t.Errorf("missing table: exit %d, want %d", code, exitFail)
	}
}

// relayOne adds one message and has a relay publish and mark it.
func relayOne(t *testing.T, db *sql.DB, ob *outbox.Outbox) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e, _ := elect.New(memlock.New(), "relay")
	r, err := outbox.NewRelay(ob, e, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
		cancel() // the round still marks what it published
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Add(ctx, db, outbox.Message{Topic: "payments", Key: "acct"}); err != nil {
		t.Fatal(err)
	}
	_ = r.Run(ctx, "relay-1")
}
