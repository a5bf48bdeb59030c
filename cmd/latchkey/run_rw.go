package main

import (
	"context"
	"flag"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// rwFlags are run's --shared and --exclusive.
type rwFlags struct {
	shared, exclusive *bool
}

func addRWFlags(fs *flag.FlagSet) rwFlags {
	return rwFlags{
		shared: fs.Bool("shared", false,
			"take KEY's read-write lock shared: runs with --shared hold it together (readers)"),
		exclusive: fs.Bool("exclusive", false,
			"take KEY's read-write lock alone, keeping --shared and --exclusive runs out; new --shared runs wait behind one that waits (a writer)"),
	}
}

// check returns the usage error of the two flags together, "" if none.
func (f rwFlags) check() string {
	if *f.shared && *f.exclusive {
		return "latchkey run: --shared and --exclusive exclude each other"
	}
	return ""
}

// open opens the Locker run takes KEY from: the backend's plain lock, or
// its read-write lock's shared or exclusive side. A read-write lock and a
// plain lock of one key do not exclude each other.
func (f rwFlags) open(ctx context.Context, backend string) (lockurl.Locker, error) {
	if !*f.shared && !*f.exclusive {
		return lockurl.Open(ctx, backend)
	}
	l, err := lockurl.OpenRW(ctx, backend)
	if err != nil {
		return nil, err
	}
	side := l.Writers()
	if *f.shared {
		side = l.Readers()
	}
	return rwSide{side, l}, nil
}

// rwSide is one side of a read-write Locker that closes the whole.
type rwSide struct {
	lock.Locker
	l *lockurl.RWLocker
}

func (s rwSide) Close() error { return s.l.Close() }
