package main

import (
	"path/filepath"
	"testing"
)

// Processes that open one new SQLite file at once race to put it in WAL
// mode; the loser's first connection failed with SQLITE_BUSY at once
// ("reading the server version: database is locked"), without waiting out
// the busy timeout, so one of five `latchkey elect --again` candidates could
// exit 69 as it started. Six at once, three times: every one gets the file.
// The race itself is caught in one process, where openers start within
// microseconds of each other (internal/backendurl's
// TestSQLiteDBOpenedByManyAtOnce): processes started by a test reach the
// file too far apart for that, and ninety rounds here passed without the
// fix. This test keeps the command's own path to the file covered.
func TestSQLiteOpenedByManyProcessesAtOnce(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		dir := t.TempDir()
		url := "sqlite://" + filepath.Join(dir, "locks.db")
		procs := make([]func() (int, string), 6)
		for i := range procs {
			cmd, out := cliProc(t, dir, "lock", "ls", "--backend", url)
			procs[i] = func() (int, string) { return exitCode(t, cmd), out.String() }
		}
		for _, wait := range procs {
			if code, out := wait(); code != exitOK {
				t.Fatalf("round %d: latchkey lock ls exited %d:\n%s", round, code, out)
			}
		}
	}
}
