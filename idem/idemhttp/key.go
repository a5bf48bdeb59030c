package idemhttp

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxKeyLen is the longest client key accepted, in bytes after unquoting, as
// the IETF draft recommends (255).
const MaxKeyLen = 255

// Errors about the client's key; the middleware answers each with 400.
var (
	// ErrKeyMissing means a guarded request carried no key.
	ErrKeyMissing = errors.New("idemhttp: idempotency key missing")
	// ErrKeyMalformed means the key is neither a structured-field string nor a
	// bare token, is empty, or the header appears more than once.
	ErrKeyMalformed = errors.New("idemhttp: idempotency key malformed")
	// ErrKeyTooLong means the key is longer than MaxKeyLen bytes.
	ErrKeyTooLong = errors.New("idemhttp: idempotency key longer than 255 bytes")
)

// ParseKey reads an Idempotency-Key field value. Two forms are accepted and
// mean the same key:
//
//   - the draft's structured-field string (RFC 8941 sf-string): "8e03978e-40d5",
//     printable ASCII in double quotes, with \" and \\ as the only escapes;
//   - a bare key: 8e03978e-40d5, one or more visible ASCII characters other
//     than DQUOTE, backslash, comma and semicolon.
//
// Spaces and tabs around the value are ignored. Structured-field parameters
// (a ";" after the string) are refused rather than silently dropped, and so is
// a list (","). The key returned is the unquoted one, 1 to MaxKeyLen bytes.
// Errors: ErrKeyMalformed, ErrKeyTooLong.
func ParseKey(v string) (string, error) {
	v = trimOWS(v)
	if v == "" {
		return "", fmt.Errorf("%w: empty", ErrKeyMalformed)
	}
	if len(v) > 4*MaxKeyLen {
		return "", ErrKeyTooLong
	}
	var key string
	if v[0] == '"' {
		k, rest, err := parseSFString(v)
		if err != nil {
			return "", err
		}
		if rest != "" {
			return "", fmt.Errorf("%w: %q after the quoted key", ErrKeyMalformed, rest)
		}
		key = k
	} else {
		for i := 0; i < len(v); i++ {
			if !bareKeyChar(v[i]) {
				return "", badChar(v, i)
			}
		}
		key = v
	}
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty", ErrKeyMalformed)
	case len(key) > MaxKeyLen:
		return "", ErrKeyTooLong
	}
	return key, nil
}

// parseSFString parses the sf-string at the start of v (RFC 8941 4.2.5) and
// returns it unescaped with the rest of v.
func parseSFString(v string) (key, rest string, err error) {
	b := make([]byte, 0, len(v))
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", "", fmt.Errorf("%w: bad escape", ErrKeyMalformed)
			}
			b = append(b, v[i])
		case c == '"':
			return string(b), v[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", "", badChar(v, i) // position counts the opening quote
		default:
			b = append(b, c)
		}
	}
	return "", "", fmt.Errorf("%w: unterminated quoted key", ErrKeyMalformed)
}

func bareKeyChar(c byte) bool {
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != ',' && c != ';'
}

func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// checkKey applies the length and character rules of ParseKey to a key taken
// from somewhere other than the header (the body, a caller's function): 1 to
// MaxKeyLen bytes of printable ASCII, spaces allowed.
func checkKey(k string) error {
	if k == "" {
		return ErrKeyMissing
	}
	if len(k) > MaxKeyLen {
		return ErrKeyTooLong
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return badChar(k, i)
		}
	}
	return nil
}

// badChar is the error of a key whose byte i is not allowed, naming the
// character a client sent (an "Ж", not its first byte) and its position in
// characters, or the byte where it is no UTF-8.
func badChar(s string, i int) error {
	pos := utf8.RuneCountInString(s[:i])
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Errorf("%w: byte 0x%02x at position %d is not UTF-8", ErrKeyMalformed, s[i], pos)
	}
	return fmt.Errorf("%w: character %q (U+%04X) at position %d", ErrKeyMalformed, r, r, pos)
}
