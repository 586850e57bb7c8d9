package main

import "io"

func runSidecar(args []string, stderr io.Writer) int {
	_, _ = args, stderr
	return 1
}
