package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/latchkey-go/latchkey/idem"
)

// StoreKey returns the key under which the middleware keeps the record of a
// request: the scope of principal, method and route, and the client's key,
// each part encoded with idem.Key so that no two scopes alias. With it an
// operator, or a support tool, finds a customer's record in any store (see
// idem.Inspector) without knowing the encoding.
//
// The parts are those the middleware sees:
//
//   - principal is what the WithPrincipal function returned, unhashed; the
//     key holds only its SHA-256. For the default, AuthorizationPrincipal,
//     that is "authz-sha256:" and the hex SHA-256 of the Authorization
//     header's value, or "" for requests without one. The latchkey gateway's
//     principal_header rules use "header:" and the header's value.
//   - method is the request method, such as "POST".
//   - route is what the WithRoute function returned; by default the
//     request's escaped URL path, such as "/payments".
//   - key is the client's key, unquoted: 1 to MaxKeyLen bytes of printable
//     ASCII.
//
// It returns ErrKeyMissing, ErrKeyTooLong or ErrKeyMalformed for a key the
// middleware would have refused, and an error wrapping idem.ErrInvalid for
// a method that is not an HTTP token.
func StoreKey(principal, method, route, key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	if !validToken(method) {
		return "", fmt.Errorf("%w: %q is not an HTTP method", idem.ErrInvalid, method)
	}
	return storeKey(principal, method, route, key), nil
}

// storeKey is StoreKey for parts already checked: idem.Key("http", "p" +
// digest(principal), method, scopePart(route), key), built in one
// allocation.
func storeKey(principal, method, route, key string) string {
	var pd [2 * sha256.Size]byte
	hexDigest(pd[:], principal)
	b := make([]byte, 0, 512)
	b = appendKeyPart(b, "", "http")
	b = appendKeyPart(append(b, ' '), "p", string(pd[:]))
	b = appendKeyPart(append(b, ' '), "", method)
	if plainScope(route) {
		b = appendKeyPart(append(b, ' '), "=", route)
	} else {
		var rd [2 * sha256.Size]byte
		hexDigest(rd[:], route)
		b = appendKeyPart(append(b, ' '), "#", string(rd[:]))
	}
	b = appendKeyPart(append(b, ' '), "", key)
	return string(b)
}

// appendKeyPart appends the part prefix+s as idem.Key writes a part: its
// length in bytes, a colon and the part.
func appendKeyPart(b []byte, prefix, s string) []byte {
	b = strconv.AppendInt(b, int64(len(prefix)+len(s)), 10)
	b = append(b, ':')
	b = append(b, prefix...)
	return append(b, s...)
}

// hexDigest writes the hex SHA-256 of s into dst (64 bytes).
func hexDigest(dst []byte, s string) {
	sum := sha256.Sum256([]byte(s))
	hex.Encode(dst, sum[:])
}

// plainScope says whether scopePart keeps s as it is: at most 256 bytes of
// UTF-8 without control characters (what idem.CheckKey accepts).
func plainScope(s string) bool {
	if len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
