package dedupurl_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/dedupurl"
)

// openerEnv, when set to "URL at UNIXNANO", makes
// TestSQLiteFileOpenedByManyProcesses the process it starts: it opens
// the store URL names at that time, and exits.
const openerEnv = "DEDUPURL_TEST_OPEN"

// TestSQLiteFileOpenedByManyProcesses: processes that open one SQLite
// file not yet in WAL mode at once race to put it in WAL mode, and the
// loser's first connection failed with SQLITE_BUSY at once ("database is
// locked"), without waiting out the busy timeout. Eight processes at once,
// ten times, each opening a new inbox file and forgetting an id: every
// one opens the file.
func TestSQLiteFileOpenedByManyProcesses(t *testing.T) {
	if raw, at, ok := strings.Cut(os.Getenv(openerEnv), " at "); ok {
		// All the processes open at once, at the time they were given.
		ns, _ := strconv.ParseInt(at, 10, 64)
		time.Sleep(time.Until(time.Unix(0, ns)))
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
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	t.Parallel()
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "inbox.db")
		inboxFile(t, path)
		raw := "sqlite://" + path
		cmds := make([]*exec.Cmd, 8)
		outs := make([]*bytes.Buffer, len(cmds))
		at := strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10)
		for i := range cmds {
			cmds[i] = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteFileOpenedByManyProcesses$")
			cmds[i].Env = append(os.Environ(), openerEnv+"="+raw+" at "+at)
			outs[i] = new(bytes.Buffer)
			cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d: process %d: %v: %s", round, i, err, outs[i])
			}
		}
		if t.Failed() {
			return
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
