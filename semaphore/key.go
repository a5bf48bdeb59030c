package semaphore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/latchkey-go/latchkey/lock"
)

// Limits on the arguments the semaphore accepts.
const (
	// MaxPermits is the largest permit count N.
	MaxPermits = 100000
	// MaxNameLen is the longest name, in bytes: a lock key's limit less
	// room for the permit counts Key adds.
	MaxNameLen = lock.MaxKeyLen - 24
)

// A Request is what one acquisition asks a backend for, as Key encodes it:
// Count of Name's Permits.
type Request struct {
	Name    string
	Permits int // N, the permit count every party agrees on
	Count   int // how many permits this acquisition takes, 1 to Permits
}

// Key returns the lock key a backend is passed for an acquisition of count
// of name's permits permits: "permits/count/name". The backend reads it back
// with ParseKey; the name is data and may hold any bytes, '/' included.
func Key(name string, permits, count int) string {
	return strconv.Itoa(permits) + "/" + strconv.Itoa(count) + "/" + name
}

// ParseKey reads back a key made by Key. It returns an error wrapping
// lock.ErrInvalid for anything Key cannot produce from valid arguments.
func ParseKey(key string) (Request, error) {
	ns, rest, ok1 := strings.Cut(key, "/")
	ks, name, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return Request{}, fmt.Errorf("%w: semaphore: %q is not a semaphore key", lock.ErrInvalid, key)
	}
	n, err1 := strconv.Atoi(ns)
	k, err2 := strconv.Atoi(ks)
	if err1 != nil || err2 != nil || strconv.Itoa(n) != ns || strconv.Itoa(k) != ks {
		return Request{}, fmt.Errorf("%w: semaphore: %q is not a semaphore key", lock.ErrInvalid, key)
	}
	r := Request{Name: name, Permits: n, Count: k}
	return r, r.check()
}

// check validates r as Acquire does.
func (r Request) check() error {
	if err := CheckName(r.Name); err != nil {
		return err
	}
	if err := checkPermits(r.Permits); err != nil {
		return err
	}
	if r.Count < 1 || r.Count > r.Permits {
		return fmt.Errorf("%w: semaphore: %d permits asked of %d", lock.ErrInvalid, r.Count, r.Permits)
	}
	return nil
}

// CheckName reports whether name is acceptable to every backend: non-empty
// and at most MaxNameLen bytes. Names are data: any bytes are allowed.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: semaphore: empty name", lock.ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: semaphore: name is %d bytes, longer than %d", lock.ErrInvalid, len(name), MaxNameLen)
	}
	return nil
}

func checkPermits(n int) error {
	if n < 1 || n > MaxPermits {
		return fmt.Errorf("%w: semaphore: permit count %d outside [1, %d]", lock.ErrInvalid, n, MaxPermits)
	}
	return nil
}
