package rwlocktest

import (
	"syscall"
	"unsafe"
)

const procsSupported = true

// procAttr makes a child die with the test binary.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// monotonic is CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the machine, which never jumps.
func monotonic() int64 {
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
