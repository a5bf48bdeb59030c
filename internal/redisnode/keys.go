package redisnode

import "strings"

// LockKey returns the Redis key of key's lock under prefix. Its companions,
// the fencing counter and the waiters flag, append ":fence" and ":waiters";
// all three share the hash tag between the braces, so one script can touch
// them on Redis Cluster. The tag is key itself unless key starts with '}'
// (which would make an empty tag, hashed as the whole name) or '\', which are
// escaped with a leading '\' so distinct keys never share a name.
func LockKey(prefix, key string) string {
	esc := ""
	if key[0] == '}' || key[0] == '\\' {
		esc = `\`
	}
	return prefix + "{" + esc + key + "}"
}

// userKey inverts LockKey; ok is false for names that LockKey cannot produce.
func userKey(prefix, name string) (key string, ok bool) {
	if !strings.HasPrefix(name, prefix+"{") || !strings.HasSuffix(name, "}") || len(name) < len(prefix)+3 {
		return "", false
	}
	t := name[len(prefix)+1 : len(name)-1]
	switch t[0] {
	case '\\':
		t = t[1:]
		if t == "" || (t[0] != '}' && t[0] != '\\') {
			return "", false
		}
	case '}':
		return "", false
	}
	return t, true
}

// Keys returns the Redis keys of key's lock (holding the owner) and of its
// fencing counter (holding the last token, in decimal), which share one hash
// tag.
func (b *Node) Keys(key string) (lock, fence string) {
	lk := LockKey(b.prefix, key)
	return lk, lk + ":fence"
}
