//go:build !linux

package dedupdrill

import "syscall"

// procAttr returns nil: only Linux can tie a child's life to ours.
func procAttr() *syscall.SysProcAttr { return nil }
