//go:build !linux

package rwlocktest

import (
	"syscall"
	"time"
)

const procsSupported = false

func procAttr() *syscall.SysProcAttr { return nil }

func monotonic() int64 { return time.Now().UnixNano() }
