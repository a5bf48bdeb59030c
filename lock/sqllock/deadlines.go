package sqllock

import "time"

// maxDeadlines is how many keys a deadlines holds before it forgets those
// whose time has ended.
const maxDeadlines = 1024

// deadlines holds, for the keys of a Locker that need it, until when
// something about each lasts: its yield of a key to the line (turns.go), a
// promise its release made to another Locker (queue.go). Its user guards it.
type deadlines map[string]time.Time

// set records that key's lasts until end; a full map first forgets those
// that have ended.
func (d *deadlines) set(key string, end time.Time) {
	if *d == nil {
		*d = make(deadlines)
	}
	if len(*d) >= maxDeadlines {
		now := time.Now()
		for k, e := range *d {
			if !e.After(now) {
				delete(*d, k)
			}
		}
	}
	(*d)[key] = end
}

// left returns how long key's lasts from now: 0 if it was never set or has
// ended, and is then forgotten.
func (d deadlines) left(key string) time.Duration {
	end, ok := d[key]
	if !ok {
		return 0
	}
	if l := time.Until(end); l > 0 {
		return l
	}
	delete(d, key)
	return 0
}
