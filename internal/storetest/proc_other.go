//go:build !linux

package storetest

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere the store
// is killed by t.Cleanup alone.
func dieWithParent() *syscall.SysProcAttr { return nil }
