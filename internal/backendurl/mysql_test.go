package backendurl

import (
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// A mysql:// URL interpolates the arguments unless it says otherwise, so
// each statement is one round trip; the URL's own choice stands.
func TestMySQLDSNInterpolates(t *testing.T) {
	for raw, want := range map[string]bool{
		"mysql://u:pw@h/db":                         true,
		"mysql://u:pw@h/db?interpolateParams=false": false,
		"mysql://u:pw@h/db?interpolateParams=true":  true,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		dsn, err := MySQLDSN(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.InterpolateParams != want || cfg.Passwd != "pw" || cfg.DBName != "db" {
			t.Errorf("%s: interpolateParams %v, password %q, db %q; want %v", raw, cfg.InterpolateParams, cfg.Passwd, cfg.DBName, want)
		}
	}
}
