package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
)

// pauseOutsideWrite freezes a holder with stop and, on SQLite, makes sure it
// did not freeze inside a write transaction. SQLite's one write lock belongs
// to the process, so a holder frozen inside one (a renewal, say) stops every
// other writer on the file until it resumes: a property of the file, which
// the package doc of lock/sqllock states, not of the lease a test pauses.
// It probes with BEGIN IMMEDIATE; while that stays busy for 2 s (longer than
// any live writer's transaction), it resumes the holder with cont for a
// moment and freezes it again.
func pauseOutsideWrite(t *testing.T, url string, stop, cont func()) {
	t.Helper()
	stop()
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(2000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 10 {
		if err := probeWrite(t.Context(), db); err == nil {
			return
		} else if !strings.Contains(err.Error(), "SQLITE_BUSY") && !strings.Contains(err.Error(), "locked") {
			t.Fatalf("probing %s for a frozen writer: %v", path, err)
		}
		t.Log("the holder froze inside a write transaction; resuming it for a moment")
		cont()
		time.Sleep(50 * time.Millisecond)
		stop()
	}
	t.Fatal("the holder froze inside a write transaction ten times")
}

// probeWrite takes SQLite's write lock and gives it back at once.
func probeWrite(ctx context.Context, db *sql.DB) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, "ROLLBACK")
	return err
}
