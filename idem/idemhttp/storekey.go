package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// storeKey is StoreKey for parts already checked.
func storeKey(principal, method, route, key string) string {
	return idem.Key("http", "p"+digest(principal), method, scopePart(route), key)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// scopePart keeps a short printable part as it is and replaces any other by
// its digest; the prefixes keep the two forms apart.
func scopePart(s string) string {
	if len(s) <= 256 && utf8.ValidString(s) && idem.CheckKey("x"+s) == nil {
		return "=" + s
	}
	return "#" + digest(s)
}
