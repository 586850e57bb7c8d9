package main

import "testing"

// TestReleaseWhenQuietWithGarbage: memory is released at a quiet tick when
// the heap holds enough garbage, whether a burst or a trickle left it, and
// neither while allocation is busy nor with little garbage.
func TestReleaseWhenQuietWithGarbage(t *testing.T) {
	var r idleRelease
	var h heap
	releases := 0
	step := func(allocated, garbage uint64) {
		h.allocated += allocated
		h.garbage = garbage
		if r.observe(h) {
			releases++
			h.garbage = 0 // the full GC collected it
		}
	}
	expect := func(what string, want int) {
		t.Helper()
		if releases != want {
			t.Fatalf("%s: %d releases, want %d", what, releases, want)
		}
	}
	for i := range 4 { // a burst: 4 busy ticks
		step(garbageBytes, uint64(i+1)*garbageBytes)
	}
	expect("during the burst", 0)
	step(0, 4*garbageBytes)
	expect("at the first quiet tick", 1)
	step(0, 0)
	expect("while idle", 1)
	for i := range 15 { // a trickle of quiet ticks, below garbageBytes in all
		step(idleBytes/32, uint64(i+1)*idleBytes/32)
	}
	expect("with little garbage", 1)
	for range 2 * garbageBytes / (idleBytes / 2) { // the trickle goes on
		if releases == 2 {
			break
		}
		step(idleBytes/2, h.garbage+idleBytes/2)
	}
	expect("once a trickle left enough garbage", 2)
}
