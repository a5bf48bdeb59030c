package semaphore

import (
	"fmt"

	"github.com/latchkey-go/latchkey/lock"
)

// Limits on the arguments the semaphore accepts.
const (
	// MaxPermits is the largest permit count N.
	MaxPermits = 100000
	// MaxNameLen is the longest name, in bytes: a lock key's limit less
	// room for the permit counts a Client's lock keys put before it.
	MaxNameLen = lock.MaxKeyLen - 24
)

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
