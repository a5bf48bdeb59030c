package zklock

import (
	"strings"

	"github.com/latchkey-go/latchkey/lock"
)

// One name is one resource. A lock and a read-write lock of one name share
// its node's children, as kazoo's Lock, ReadLock and WriteLock do: they queue
// together, a lock counting as a writer. A semaphore's permits are children
// of the same node too, but of no queue; so a lock's or a read-write lock's
// contender that finds permits beside its node, and a semaphore's acquirer
// that finds contenders beside its new permits, withdraw what they created
// and fail with a *lock.ModeError. Each looks after it created its own
// nodes, and a server answers a session's read only after applying that
// session's writes, and so every write ordered before them: of two
// acquisitions in different modes the later one sees the earlier (both may
// give up, if each created its nodes before the other looked).

// heldAsSemaphore returns the *lock.ModeError of a lock or read-write lock
// contender on name whose node has children, or nil when every child is a
// contender (a lock's, a reader's or a writer's, by name).
func heldAsSemaphore(name string, children []string) error {
	for _, c := range children {
		if _, ok := sequence(c); !ok {
			return &lock.ModeError{Key: name, HeldAs: lock.ModeSemaphore}
		}
	}
	return nil
}

// heldAsQueue returns the *lock.ModeError of a semaphore acquirer on name
// whose node has children, or nil when none of them is a lock's or a
// read-write lock's contender.
func heldAsQueue(name string, children []string) error {
	held := ""
	for _, c := range children {
		if _, ok := sequence(c); !ok {
			continue
		}
		if strings.Contains(c, "__rlock__") {
			held = lock.ModeReadWrite
			continue
		}
		return &lock.ModeError{Key: name, HeldAs: lock.ModeLock} // a lock, or a writer
	}
	if held != "" {
		return &lock.ModeError{Key: name, HeldAs: held}
	}
	return nil
}
