//go:build !linux

package suitekit

import (
	"syscall"
	"time"
)

func procAttr() *syscall.SysProcAttr { return nil }

// Now is the wall clock in nanoseconds: shared by the machine's processes,
// but it may jump.
func Now() int64 { return time.Now().UnixNano() }
