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
	for _, tc := range []struct{ key, want, quoted string }{
		{"Жk", `character 'Ж' (U+0416) at position 0`, `character 'Ж' (U+0416) at position 1`},
		{"ok-é", `character 'é' (U+00E9) at position 3`, `character 'é' (U+00E9) at position 4`},
		{"a\xffb", `byte 0xff at position 1 is not UTF-8`, `byte 0xff at position 2 is not UTF-8`},
	} {
		_, err := ParseKey(tc.key)
		if !errors.Is(err, ErrKeyMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKey(%q) = %v, want %q", tc.key, err, tc.want)
		}
		// The same key in the header's quoted form: the position counts
		// the opening quote.
		if _, err := ParseKey(`"` + tc.key + `"`); !errors.Is(err, ErrKeyMalformed) || !strings.Contains(err.Error(), tc.quoted) {
			t.Errorf("ParseKey(quoted %q) = %v, want %q", tc.key, err, tc.quoted)
		}
		if err := checkKey(tc.key); !errors.Is(err, ErrKeyMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkKey(%q) = %v, want %q", tc.key, err, tc.want)
		}
	}
}
