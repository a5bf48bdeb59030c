package testsvc

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// ExamplePostgres returns the URL of a PostgreSQL schema of the caller's own
// on the shared database (EnvPostgresURL, or DefaultPostgresURL), and a
// function that drops it with everything in it. Runnable examples use it:
// examples of several test binaries running at once then never share a
// table. An example has no *testing.T, so when the server cannot be reached
// the URL is returned as it is, and the example's own output shows the
// error.
func ExamplePostgres() (url string, drop func()) {
	base := cmp.Or(os.Getenv(EnvPostgresURL), DefaultPostgresURL)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "example_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	db, err := sql.Open("pgx", base)
	if err != nil {
		return base, func() {}
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = db.Close()
		return base, func() {}
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema, func() {
		_, _ = db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
		_ = db.Close()
	}
}
