package lock

import (
	cryptorand "crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxHolderLen is the longest holder label, in bytes, WithHolder accepts.
const MaxHolderLen = 128

// ownerIDLen is the length of an owner's random id: 128 bits, hex.
const ownerIDLen = 32

// WithHolder stores label with the lock while it is held, to tell an
// operator who holds it (host, pid, request id): Lease.Holder returns it,
// and ParseOwner reads it back from what a backend stores. Default: no
// label. The label is readable by anyone who can read the lock's server:
// never put a secret in it. It must be valid UTF-8 without control
// characters, at most MaxHolderLen bytes; "" means no label.
func WithHolder(label string) Option {
	return func(c *config) {
		if err := validateHolder(label); err != nil {
			c.invalid = err
			return
		}
		c.holder = label
	}
}

// CheckHolder reports whether label is acceptable to WithHolder (and
// Lease.SetHolder): valid UTF-8 without control characters, at most
// MaxHolderLen bytes. Its error wraps ErrInvalid.
func CheckHolder(label string) error { return validateHolder(label) }

func validateHolder(label string) error {
	switch {
	case len(label) > MaxHolderLen:
		return fmt.Errorf("%w: holder label is %d bytes, longer than %d", ErrInvalid, len(label), MaxHolderLen)
	case !utf8.ValidString(label):
		return fmt.Errorf("%w: holder label is not valid UTF-8", ErrInvalid)
	case strings.ContainsFunc(label, unicode.IsControl):
		return fmt.Errorf("%w: holder label has a control character", ErrInvalid)
	}
	return nil
}

// newOwnerID returns 64 random bits, hex-encoded: the first half of the
// random id of every owner one Manager makes (Manager.newOwner).
func newOwnerID() string {
	var b [ownerIDLen / 4]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

// newOwner returns the owner string an Acquire passes to its backend: a
// random id of 128 bits, hex-encoded, then a space and the holder label if
// there is one. The id's first 64 bits are the Manager's (m.ownerID), the
// same for all its leases, and the last 64 are the lease's own: a backend
// can tell that two owners come from one Manager (lock/redislock does, to
// know whether a waiter of another Locker is behind a holder), and ids stay
// unique across Managers.
func (m *Manager) newOwner(label string) string {
	var b [ownerIDLen / 4]byte
	_, _ = cryptorand.Read(b[:])
	var buf [ownerIDLen + 1 + MaxHolderLen]byte
	out := append(buf[:0], m.ownerID...)
	out = hex.AppendEncode(out, b[:])
	if label != "" {
		out = append(out, ' ')
		out = append(out, label...)
	}
	return string(out)
}

// ParseOwner splits an owner string, as a backend stores it with a held
// lock, into the lease's random id (32 hex digits) and its holder label (""
// if WithHolder was not given). ok is false if owner is not of that form,
// such as another client's lock on a shared server.
func ParseOwner(owner string) (id, label string, ok bool) {
	if len(owner) < ownerIDLen {
		return "", "", false
	}
	id, rest := owner[:ownerIDLen], owner[ownerIDLen:]
	if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
		return "", "", false
	}
	switch {
	case rest == "":
		return id, "", true
	case rest[0] != ' ' || validateHolder(rest[1:]) != nil || rest == " ":
		return "", "", false
	}
	return id, rest[1:], true
}
