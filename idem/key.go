package idem

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that a Store is given. Scoped keys
// built by [Key] from a 255-byte client key stay far below it.
const MaxKeyLen = 1024

// Key joins the parts of a scoped key (for example principal, method, route
// and the client's key) so that no two different tuples give the same key:
// each part is written as its length in bytes, a colon, and the part itself.
// ("a:b", "c") and ("a", "b:c") therefore stay apart, which delimiter-joined
// keys do not.
func Key(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// CheckKey reports whether key can be given to a Store: 1 to MaxKeyLen bytes
// of UTF-8 without control characters. It returns an error wrapping
// ErrInvalidKey otherwise.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidKey, r)
		}
	}
	return nil
}

// NewToken returns 128 random bits from crypto/rand, hex-encoded. Stores use
// it for claim tokens; IssueToken uses it for submit tokens.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand: "Read ... never returns an error")
	return hex.EncodeToString(b[:])
}
