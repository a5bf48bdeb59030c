package redisnode

import (
	"strings"
	"testing"
)

func TestKeyNames(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "order:42", "}", "}x", `\`, `\}`, `\\`, `}}`, "{x}", "a}b", "x{", "ü"}
	seen := map[string]string{}
	for _, k := range keys {
		name := LockKey("p:", k)
		if prev, dup := seen[name]; dup {
			t.Errorf("keys %q and %q share the name %q", prev, k, name)
		}
		seen[name] = k
		got, ok := userKey("p:", name)
		if !ok || got != k {
			t.Errorf("userKey(LockKey(%q)) = %q, %v", k, got, ok)
		}
		// All three names must hash to one slot: the tag between the first
		// '{' and the next '}' is the same, non-empty part.
		tag := hashTag(name)
		if tag == "" || tag != hashTag(name+":fence") || tag != hashTag(name+":waiters") {
			t.Errorf("key %q: hash tags %q %q %q", k, tag, hashTag(name+":fence"), hashTag(name+":waiters"))
		}
	}
	if got := LockKey(DefaultPrefix, "order:42"); got != "latchkey:lock:{order:42}" {
		t.Errorf("LockKey = %q", got)
	}
}

// hashTag is Redis Cluster's rule: the part between the first '{' and the
// first '}' after it, if not empty.
func hashTag(s string) string {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(s[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return s[i+1 : i+1+j]
}
