package sqlstore

import "github.com/latchkey-go/latchkey/internal/sqldialect"

// Dialect is the SQL flavour of the database: Detect, Postgres, SQLite or
// MySQL (MySQL 8.0 and MariaDB 10.6 or later).
// It is one type across latchkey's SQL packages (sqllock.Postgres and
// sqlstore.Postgres are the same value). Migrate refuses a server older than
// latchkey supports, naming the version it needs.
type Dialect = sqldialect.Dialect

// The dialects. Detect tells them apart by the *sql.DB's driver: PostgreSQL
// through pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib, driver
// name "pgx") or lib/pq; SQLite through modernc.org/sqlite (driver name
// "sqlite"), say, opened with WAL and a busy timeout:
// file:PATH?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL); MySQL
// and MariaDB through github.com/go-sql-driver/mysql (driver name "mysql").
const Detect, Postgres, SQLite, MySQL = sqldialect.Unknown, sqldialect.Postgres, sqldialect.SQLite, sqldialect.MySQL
