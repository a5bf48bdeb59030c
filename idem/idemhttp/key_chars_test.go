package idemhttp

import (
	"errors"
	"strings"
	"testing"
)

// TestBadKeyNamesTheCharacter: a key with a non-ASCII letter was reported by
// its first byte ("byte 'Ð' at 0", garbled), also in the 400 body a client
// reads. The error names the character and its position in characters.
func TestBadKeyNamesTheCharacter(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"Жk", `character 'Ж' (U+0416) at position 0`},
		{"ok-é", `character 'é' (U+00E9) at position 3`},
		{"a\xffb", `byte 0xff at position 1 is not UTF-8`},
	} {
		_, err := ParseKey(tc.key)
		if !errors.Is(err, ErrKeyMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKey(%q) = %v, want %q", tc.key, err, tc.want)
		}
		if err := checkKey(tc.key); !errors.Is(err, ErrKeyMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkKey(%q) = %v, want %q", tc.key, err, tc.want)
		}
	}
}
