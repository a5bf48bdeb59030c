package testsvc

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvMySQLDSN overrides the go-sql-driver DSN of the shared MySQL or MariaDB
// server.
const EnvMySQLDSN = "LATCHKEY_MYSQL_DSN"

// DefaultMySQLDSN is the shared MariaDB used when EnvMySQLDSN is unset,
// matching scripts/services.sh.
const DefaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test"

// MySQLServerDSN returns the DSN of the shared MySQL or MariaDB server
// (LATCHKEY_MYSQL_DSN, default root@tcp(127.0.0.1:3306)/test) after checking
// that it answers a query within 2 s; it calls Unavailable when it does not.
func MySQLServerDSN(t testing.TB) string {
	t.Helper()
	dsn := cmp.Or(os.Getenv(EnvMySQLDSN), DefaultMySQLDSN)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testsvc: %s: %v", EnvMySQLDSN, err)
	}
	if cfg.Net == "tcp" {
		c, err := net.DialTimeout("tcp", cfg.Addr, checkTimeout)
		if err != nil {
			Unavailable(t, "testsvc: mysql at %s: %v", cfg.Addr, err)
			return dsn
		}
		c.Close()
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		Unavailable(t, "testsvc: mysql at %s: %v", cfg.Addr, err)
	}
	return dsn
}

// MySQL creates a database of its own for the test on the shared MySQL or
// MariaDB server (see MySQLServerDSN) and returns the DSN that connects to
// it; t.Cleanup drops it. Tables of one test never meet another's, whatever
// their names. params are go-sql-driver DSN parameters added to the DSN, as
// key, value pairs: "tx_isolation", "'READ-COMMITTED'".
func MySQL(t testing.TB, params ...string) string {
	t.Helper()
	base := MySQLServerDSN(t)
	cfg, _ := mysql.ParseDSN(base) // parsed by MySQLServerDSN
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testsvc: random: %v", err)
	}
	name := "latchkey_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("mysql", base)
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("testsvc: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("testsvc: drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	if len(params)%2 != 0 {
		t.Fatalf("testsvc: MySQL params %q are not key, value pairs", params)
	}
	for i := 0; i < len(params); i += 2 {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[params[i]] = params[i+1]
	}
	return cfg.FormatDSN()
}

// MySQLIsolation is the DSN parameter that sets the session's isolation level
// on the server behind db, "READ-COMMITTED" or "REPEATABLE-READ": MariaDB
// calls the variable tx_isolation, MySQL 8.0 transaction_isolation. Pass the
// result to MySQL.
func MySQLIsolation(t testing.TB, level string) []string {
	t.Helper()
	db, err := sql.Open("mysql", MySQLServerDSN(t))
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatalf("testsvc: mysql version: %v", err)
	}
	name := "transaction_isolation"
	if strings.Contains(strings.ToLower(v), "mariadb") {
		name = "tx_isolation"
	}
	return []string{name, "'" + level + "'"}
}

// MySQLURL is MySQL as a mysql://user:pass@host:port/db URL, the form
// lock/lockurl and idem/idemurl open.
func MySQLURL(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQL(t))
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return u.String()
}
