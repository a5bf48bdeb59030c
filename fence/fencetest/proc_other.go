//go:build !linux

package fencetest

import (
	"syscall"
	"time"
)

func procAttr() *syscall.SysProcAttr { return nil }

// now is the wall clock: shared by the machine's processes, but it may jump.
func now() int64 { return time.Now().UnixNano() }
