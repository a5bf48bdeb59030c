package sqldialect

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxIdent is the longest identifier latchkey sends, in bytes: the smallest
// of the dialects' limits ([Dialect.MaxIdent]), PostgreSQL's (longer names
// are silently cut short there, so two could become one). MySQL allows 64
// and refuses longer ones, SQLite allows any length, so a name that fits
// works on every dialect and a schema can move between them.
//
// It holds for the names a package derives from a caller's too (an index
// <table>_expires, a channel <table>_released): the caller's name must leave
// room for the suffix, which Ident and Table check when given it.
const MaxIdent = 63

var (
	identPat = fmt.Sprintf(`[A-Za-z_][A-Za-z0-9_]{0,%d}`, MaxIdent-1)
	identRe  = regexp.MustCompile(`^` + identPat + `$`)
	tableRe  = regexp.MustCompile(`^(` + identPat + `\.)?` + identPat + `$`)
)

// MaxIdent is the longest identifier the server of d accepts, in bytes, or 0
// when it sets no limit (SQLite). MaxIdent, the package constant, is at most
// each of them.
func (d Dialect) MaxIdent() int { return specs[d].maxIdent }

// Ident reports an error unless name is a plain SQL identifier: a letter or
// underscore, then letters, digits, underscores, at most MaxIdent bytes with
// the longest of suffixes appended. Such names are safe to splice into
// statements unquoted.
func Ident(what, name string, suffixes ...string) error {
	if !identRe.MatchString(name) {
		return fmt.Errorf("%s %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)", what, name, MaxIdent)
	}
	return roomFor(what, name, name, suffixes)
}

// Table is Ident for a table name, which may carry one schema qualifier
// ("billing.orders"); suffixes are appended to the bare name.
func Table(name string, suffixes ...string) error {
	if !tableRe.MatchString(name) {
		return fmt.Errorf("table %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes), optionally schema-qualified", name, MaxIdent)
	}
	return roomFor("table", name, Bare(name), suffixes)
}

func roomFor(what, name, base string, suffixes []string) error {
	for _, s := range suffixes {
		if len(base)+len(s) > MaxIdent {
			return fmt.Errorf("%s %q is too long: the name %q made from it has more than %d bytes (at most %d for the %s)",
				what, name, base+s, MaxIdent, MaxIdent-len(s), what)
		}
	}
	return nil
}

// Bare returns a table name without its schema qualifier, which is how a
// statement refers to the target table's columns.
func Bare(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[i+1:]
	}
	return table
}
