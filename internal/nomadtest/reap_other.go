//go:build !linux

package nomadtest

import "syscall"

// The agent runs only on Linux; elsewhere there is nothing to reap.

func procAttr() *syscall.SysProcAttr { return nil }
func reapUnder(dir string) []string  { return nil }
func unmountUnder(dir string) error  { return nil }
