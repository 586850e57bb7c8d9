package main

import "testing"

// TestReleaseWhenIdleOncePerBurst: memory is released at the first quiet
// tick after a burst, once, and neither during the burst nor after a
// trickle of small allocations or a burst too small to leave garbage.
func TestReleaseWhenIdleOncePerBurst(t *testing.T) {
	var r idleRelease
	var allocated uint64
	releases := 0
	step := func(n uint64) {
		allocated += n
		if r.observe(allocated) {
			releases++
		}
	}
	expect := func(what string, want int) {
		t.Helper()
		if releases != want {
			t.Fatalf("%s: %d releases, want %d", what, releases, want)
		}
	}
	for range 4 { // a burst: 4 busy ticks
		step(burstBytes / 2)
	}
	expect("during the burst", 0)
	step(0)
	expect("at the first quiet tick", 1)
	step(0)
	expect("while idle", 1)
	for range 100 { // a trickle, quiet ticks of half the idle threshold
		step(idleBytes / 2)
	}
	expect("after a trickle", 1)
	step(burstBytes / 2)
	step(0)
	expect("after a small burst", 1)
	step(burstBytes / 2)
	step(idleBytes - 1)
	expect("after a burst that reaches the threshold in two parts", 2)
}
