package dedupdrill

import "syscall"

// procAttr makes a child die with the test binary, so a test run killed by
// its timeout leaves no consumer behind.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
