package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/outbox"
)

// envOutboxDB names the database "latchkey outbox" reads by default.
const envOutboxDB = "LATCHKEY_OUTBOX_DB"

const outboxUsage = `usage: latchkey outbox show --db URL [flags]

The operator's view of a transactional outbox (package outbox): how many
committed messages wait for the relay, how long the oldest has waited (the
lag to alert on), how many published messages are kept for the retention,
and the relay that wrote last: its value (who it is), its term's fencing
token and when. Nothing is changed.

Database URLs:
  postgres://user@host:5432/db[?sslmode=disable]   PostgreSQL (postgresql:// too)
  mysql://user:pass@host:3306/db                   MySQL 8 or MariaDB 10.6+
  sqlite:///path/app.db                            an existing SQLite file; sqlite:rel/path too

Times come from the database's clock.

Exit status: 0; 1 if the outbox could not be read (no table: the relay's
Migrate creates it); 69 if the database could not be reached; 2 for usage
errors.

Flags:
`

func outboxCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outbox show", flag.ContinueOnError)
	db := fs.String("db", os.Getenv(envOutboxDB), "database URL, see above ($"+envOutboxDB+"; required)")
	table := fs.String("table", outbox.DefaultTable, "the outbox table")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(fs.Output(), outboxUsage); fs.PrintDefaults() }
	if code, done := topHelp(fs, args, stdout, stderr); done {
		return code
	}
	const name = "latchkey outbox show"
	if args[0] != "show" {
		fmt.Fprintf(stderr, "latchkey outbox: unknown subcommand %q (show)\n", args[0])
		return exitUsage
	}
	names, code, ok := parseNamed(fs, args[1:], stdout, stderr)
	switch {
	case !ok:
		return code
	case len(names) > 0:
		fmt.Fprintf(stderr, "%s: no arguments expected, got %q\n", name, names)
		return exitUsage
	case *db == "":
		fmt.Fprintf(stderr, "%s: --db is required (or $%s)\n", name, envOutboxDB)
		return exitUsage
	}
	return outboxShow(ctx, name, *db, *table, *asJSON, stdout, stderr)
}

func outboxShow(ctx context.Context, name, rawURL, table string, asJSON bool, stdout, stderr io.Writer) int {
	octx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()
	db, err := openOutboxDB(octx, rawURL)
	if err != nil {
		return usageOrUnavailable(name, backendurl.NewScrubber(rawURL).Wrap(err), stderr, errOutboxURL)
	}
	defer db.Close()
	ob, err := outbox.New(db, outbox.WithTable(table))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitUsage
	}
	s, err := ob.Stats(octx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, backendurl.NewScrubber(rawURL).Wrap(err))
		return exitFail
	}
	printOutbox(stdout, backendurl.Redact(rawURL), table, s, asJSON)
	return exitOK
}

// errOutboxURL marks a database URL that cannot be used.
var errOutboxURL = errors.New("bad database URL")

// openOutboxDB opens and pings the database rawURL names.
func openOutboxDB(ctx context.Context, rawURL string) (*sql.DB, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errOutboxURL, backendurl.ParseError(err))
	}
	var driver, dsn string
	switch u.Scheme {
	case "postgres", "postgresql":
		driver, dsn = "pgx", rawURL
	case "mysql":
		driver = "mysql"
		if dsn, err = backendurl.MySQLDSN(u); err != nil {
			return nil, fmt.Errorf("%w: %w", errOutboxURL, err)
		}
	case "sqlite":
		path, err := backendurl.SQLitePath(u)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errOutboxURL, err)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%w: sqlite file %s: %w", errOutboxURL, path, errors.Unwrap(err))
		}
		driver, dsn = "sqlite", backendurl.SQLiteDSN(path)
	default:
		return nil, fmt.Errorf("%w: scheme %q; supported: postgres://, postgresql://, mysql://, sqlite://", errOutboxURL, u.Scheme)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errOutboxURL, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// outboxJSON is Stats as show prints it with --json.
type outboxJSON struct {
	DB            string  `json:"db"`
	Table         string  `json:"table"`
	Pending       int64   `json:"pending"`
	OldestPending string  `json:"oldest_pending,omitempty"`
	LagSeconds    float64 `json:"lag_seconds"`
	Published     int64   `json:"published"`
	Leader        string  `json:"leader,omitempty"`
	Token         uint64  `json:"token"`
	LastWrite     string  `json:"last_write,omitempty"`
}

func printOutbox(w io.Writer, db, table string, s outbox.Stats, asJSON bool) {
	if asJSON {
		j := outboxJSON{DB: db, Table: table, Pending: s.Pending, LagSeconds: s.Lag.Seconds(), Published: s.Published, Leader: s.Leader, Token: s.Token}
		if !s.OldestPending.IsZero() {
			j.OldestPending = s.OldestPending.UTC().Format(time.RFC3339Nano)
		}
		if !s.LastWrite.IsZero() {
			j.LastWrite = s.LastWrite.UTC().Format(time.RFC3339Nano)
		}
		writeJSON(w, j)
		return
	}
	now := s.OldestPending.Add(s.Lag) // the database's now, when something is pending
	if s.Pending == 0 {
		now = time.Now()
	}
	var f fields
	f.add("table", table)
	f.add("pending", strconv.FormatInt(s.Pending, 10))
	if s.Pending > 0 {
		f.add("oldest pending", when(s.OldestPending, now))
	}
	f.add("lag", s.Lag.Round(time.Millisecond).String())
	f.add("published", strconv.FormatInt(s.Published, 10)+" (kept for the retention)")
	if s.Token == 0 {
		f.add("relay", "none has written yet")
	} else {
		f.add("relay", strconv.Quote(s.Leader))
		f.add("term", strconv.FormatUint(s.Token, 10)+" (fencing token)")
		f.add("last write", when(s.LastWrite, now))
	}
	f.print(w)
}
