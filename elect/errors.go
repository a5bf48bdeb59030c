package elect

import (
	"errors"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	// ErrInvalid wraps every bad-input error (empty name, value too long,
	// nil Locker or function). Such calls change nothing and touch no
	// server. It is lock.ErrInvalid, so errors.Is works with either.
	ErrInvalid = lock.ErrInvalid

	// ErrNoLeader is what Election.Leader returns when nobody leads.
	ErrNoLeader = errors.New("elect: no leader")

	// ErrUnsupported is returned when the Locker cannot do what was asked
	// (read who holds the name, change a leader's value). It is
	// lock.ErrUnsupported.
	ErrUnsupported = lock.ErrUnsupported
)
