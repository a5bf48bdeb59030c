package backendurl

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// SQLiteReady waits until db, a SQLite database opened with SQLiteDSN, has
// a connection. Processes that open a new file at once race to put it in
// WAL mode, and the loser's connection fails with SQLITE_BUSY at once,
// without waiting out the busy timeout (six `latchkey lock ls` on a new
// file: one in twenty rounds failed so); it is opened again until the
// busy timeout, 10 s, has passed.
func SQLiteReady(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
