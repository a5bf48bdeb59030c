package suitekit

import (
	"syscall"
	"unsafe"
)

// procAttr makes a child die with the test binary.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// Now is CLOCK_MONOTONIC in nanoseconds: one clock for every process on the
// machine, which never jumps, so the histories of several processes can be
// put on one time line.
func Now() int64 {
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
