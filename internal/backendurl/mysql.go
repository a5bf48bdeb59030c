package backendurl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// MySQLDSN returns the go-sql-driver/mysql data source name for a
// mysql://user:pass@host:port/db?params URL: TCP to host (port 3306 when
// none is given), the database the path names (required: the tables live
// there), and the query parameters as the driver's DSN parameters
// (clientFoundRows, tls, timeout, readTimeout, or a session variable such as
// tx_isolation='READ-COMMITTED'). cacert=FILE, cert=FILE and key=FILE, as
// on the other backends' URLs, turn on TLS verified against that CA (with
// the client's certificate, for a server that asks for one); without them
// the driver's own tls=true verifies against the system's roots.
// parseTime=true unless the URL says otherwise, so
// DATETIME columns of the program's own tables scan into time.Time, and
// interpolateParams=true, so a statement is one round trip, not two. The DSN
// holds the password: never print it; print Redact(rawURL).
func MySQLDSN(u *url.URL) (string, error) {
	if u.Opaque != "" || u.Host == "" {
		return "", errors.New("mysql URL names no server; write mysql://user:pass@host:3306/db")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", fmt.Errorf("mysql URL names no database (or a path %q); write mysql://user:pass@host:3306/db", u.Path)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	rest, tlsCfg, err := TakeTLS("?" + u.RawQuery)
	if err != nil {
		return "", fmt.Errorf("mysql URL: %w", err)
	}
	query := strings.TrimPrefix(rest, "?")
	if tlsCfg != nil && u.Query().Has("tls") {
		return "", errors.New("mysql URL: tls= and cacert=, cert=, key= both say how to verify the server; give one")
	}
	// The driver parses the parameters; user and password are set after, as
	// fields, so no character of theirs can be read as DSN syntax.
	cfg, err := mysql.ParseDSN("tcp(" + addr + ")/" + db + "?" + query)
	if err != nil {
		return "", fmt.Errorf("mysql URL: %w", err)
	}
	if tlsCfg != nil {
		// A DSN names a TLS configuration by the name it was registered
		// under: one name per set of files, registered anew each time, so
		// a renewed certificate is read again.
		cfg.TLSConfig = tlsConfigName(u.Query())
		if err := mysql.RegisterTLSConfig(cfg.TLSConfig, tlsCfg); err != nil {
			return "", fmt.Errorf("mysql URL: %w", err)
		}
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	if !u.Query().Has("parseTime") {
		cfg.ParseTime = true
	}
	if !u.Query().Has("interpolateParams") {
		// One round trip per statement: without it the driver prepares
		// every statement with arguments, then executes it. The driver
		// escapes the arguments itself, and refuses the multibyte character
		// sets where that is unsafe.
		cfg.InterpolateParams = true
	}
	return cfg.FormatDSN(), nil
}

// tlsConfigName names the TLS configuration of a mysql:// URL's files.
func tlsConfigName(q url.Values) string {
	h := sha256.New()
	for _, k := range []string{ParamCACert, ParamCert, ParamKey} {
		fmt.Fprintf(h, "%s=%q;", k, q.Get(k))
	}
	return "latchkey-" + hex.EncodeToString(h.Sum(nil)[:8])
}
