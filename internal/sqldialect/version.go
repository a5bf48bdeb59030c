package sqldialect

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
)

// A version is a server's major, minor and patch number.
type version [3]int

func (v version) less(w version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v version) String() string {
	if v[2] == 0 {
		return fmt.Sprintf("%d.%d", v[0], v[1])
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
}

// MinVersion is the oldest server version of d that latchkey supports, such
// as "3.35", or for MySQL "8.0 (MariaDB 10.6)"; empty for an unsupported
// dialect.
func (d Dialect) MinVersion() string {
	if !d.Supported() {
		return ""
	}
	if d == MySQL {
		return fmt.Sprintf("%v (MariaDB %v)", mysqlMin, mariaDBMin)
	}
	return specs[d].minVersion.String()
}

// VersionQuery is the statement that reports the server's version in one
// text column, for CheckVersion.
func (d Dialect) VersionQuery() string { return specs[d].versionQuery }

// CheckVersion reports an error unless reported, the answer to VersionQuery,
// is at least MinVersion.
func (d Dialect) CheckVersion(reported string) error {
	s, ok := specs[d]
	if !ok {
		return fmt.Errorf("unsupported SQL dialect %v", d)
	}
	reported = strings.TrimSpace(reported)
	name, min := s.name, s.minVersion
	if s.flavour != nil {
		name, min = s.flavour(reported)
	}
	v, err := s.parseVersion(reported)
	if err != nil {
		return fmt.Errorf("%s reported version %q: %w", name, reported, err)
	}
	if v.less(min) {
		return fmt.Errorf("%s %v is older than %v, the oldest latchkey supports", name, v, min)
	}
	return nil
}

// Check runs VersionQuery on db and CheckVersion on its answer. A server
// older than MinVersion gives an error wrapping invalid (the calling
// package's ErrInvalid); a failed query, the database's error.
func (d Dialect) Check(ctx context.Context, db sqlconn.Conn, invalid error) error {
	if !d.Supported() {
		return fmt.Errorf("%w: unsupported SQL dialect %v", invalid, d)
	}
	var v string
	if err := db.QueryRow(ctx, d.VersionQuery()).Scan(&v); err != nil {
		return fmt.Errorf("reading the server version: %w", err)
	}
	if err := d.CheckVersion(v); err != nil {
		return fmt.Errorf("%w: %w", invalid, err)
	}
	return nil
}

// postgresVersion reads server_version_num: major*10000 + minor since
// PostgreSQL 10, major*10000 + minor*100 + patch before.
func postgresVersion(s string) (version, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return version{}, fmt.Errorf("not a server_version_num")
	}
	if n >= 100000 {
		return version{n / 10000, n % 10000, 0}, nil
	}
	return version{n / 10000, n / 100 % 100, n % 100}, nil
}

// dottedVersion reads "3.45.1".
func dottedVersion(s string) (version, error) {
	var v version
	parts := strings.Split(s, ".")
	if len(parts) > len(v) {
		return v, fmt.Errorf("not a version number")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("not a version number")
		}
		v[i] = n
	}
	return v, nil
}

// The oldest MySQL and MariaDB servers supported: JSON_TABLE (sqllock's
// batch renewal) came with MySQL 8.0 and MariaDB 10.6.
var (
	mysqlMin   = version{8, 0, 0}
	mariaDBMin = version{10, 6, 0}
)

// mysqlFlavour tells MariaDB from MySQL by VERSION()'s answer
// ("10.11.6-MariaDB-0+deb12u1", "8.0.36").
func mysqlFlavour(reported string) (string, version) {
	if strings.Contains(strings.ToLower(reported), "mariadb") {
		return "MariaDB", mariaDBMin
	}
	return "MySQL", mysqlMin
}

// mysqlVersion reads VERSION(): the dotted number before any suffix
// ("-MariaDB...", "-log"), after the "5.5.5-" that MariaDB put in front of
// its own number for old replication clients.
func mysqlVersion(s string) (version, error) {
	s = strings.TrimPrefix(s, "5.5.5-")
	if i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		s = s[:i]
	}
	return dottedVersion(s)
}
