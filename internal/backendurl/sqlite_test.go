package backendurl

import (
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// Services that start together open one new SQLite file at once. They race
// to put it in WAL mode, and the loser's first connection fails with
// SQLITE_BUSY at once, without waiting out the busy timeout: one of five
// election candidates could exit as it started. SQLiteDB opens again until
// the file answers, so every opener gets a working database. Sixteen
// openers in one process race as processes do: without the retry, a round
// failed within the first 19 to 137 (five runs, with and without -race).
func TestSQLiteDBOpenedByManyAtOnce(t *testing.T) {
	invalid := errors.New("invalid")
	for round := range 300 {
		u := &url.URL{Scheme: "sqlite", Path: filepath.Join(t.TempDir(), "locks.db")}
		start := make(chan struct{})
		errs := make(chan error, 16)
		for range cap(errs) {
			go func() {
				<-start
				db, err := SQLiteDB(t.Context(), u, invalid)
				if err == nil {
					_, err = db.ExecContext(t.Context(), "CREATE TABLE IF NOT EXISTS opened (k TEXT)")
					_ = db.Close()
				}
				errs <- err
			}()
		}
		close(start)
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
