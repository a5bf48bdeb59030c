package dedupurl_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/dedupurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestSQLiteFileOpenedByManyProcesses: processes that open one SQLite
// file not yet in WAL mode at once race to put it in WAL mode, and the
// loser's first connection failed with SQLITE_BUSY at once ("database is
// locked"), without waiting out the busy timeout. Eight processes at once,
// ten times, each opening a new inbox file and forgetting an id: every
// one opens the file.
func TestSQLiteFileOpenedByManyProcesses(t *testing.T) {
	if raw, ok := testsvc.AtOnceChild(); ok {
		ctx := context.Background()
		s, err := dedupurl.Open(ctx, raw)
		if err == nil {
			// A write, as an operator's forget is, beside the others'
			// first connections.
			if err = s.Forget(ctx, "absent", false); errors.Is(err, dedup.ErrNotFound) {
				err = nil
			}
			if cerr := s.Close(); err == nil {
				err = cerr
			}
		}
		testsvc.ExitAtOnce(err)
	}
	t.Parallel()
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "inbox.db")
		inboxFile(t, path)
		testsvc.RunAtOnce(t, "TestSQLiteFileOpenedByManyProcesses", "sqlite://"+path, 8)
		if t.Failed() {
			t.Fatalf("round %d: not every process opened the file", round)
		}
	}
}

// inboxFile creates at path an SQLite file with the inbox table, in
// SQLite's default rollback-journal mode, as a program that creates its
// inbox without latchkey's URL leaves it.
func inboxFile(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	in, err := sqlinbox.New(db)
	if err == nil {
		err = in.Migrate(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
}
