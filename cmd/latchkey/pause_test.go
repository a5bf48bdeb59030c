package main

import (
	"database/sql"
	"strings"
	"testing"
)

// pauseOutsideWrite freezes a holder with stop and, on SQLite, makes sure it
// does not freeze inside a write transaction. SQLite's one write lock belongs
// to the process, so a holder frozen inside one (a renewal, say) stops every
// other writer on the file until it resumes: a property of the file, which
// the package doc of lock/sqllock states, not of the lease a test pauses.
// The test takes the write lock itself (BEGIN IMMEDIATE waits for the
// writer of the moment to finish), freezes the holder, which then holds
// none, and gives the lock back.
func pauseOutsideWrite(t *testing.T, url string, stop func()) {
	t.Helper()
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		stop()
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("taking %s's write lock before the pause: %v", path, err)
	}
	stop()
	if _, err := c.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}
