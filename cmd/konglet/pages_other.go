//go:build !linux

package main

import "errors"

// releaseBinaryPages is Linux only (it reads /proc/self/smaps).
func releaseBinaryPages() (uint64, error) {
	return 0, errors.New("only on Linux")
}
