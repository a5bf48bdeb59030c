package dedup

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the longest message id, in bytes.
const MaxIDLen = 1024

// CheckID reports whether id can be given to a Store: 1 to MaxIDLen bytes of
// UTF-8 without control characters. It returns an error wrapping
// ErrInvalidID otherwise.
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidID, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidID)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidID, r)
		}
	}
	return nil
}
