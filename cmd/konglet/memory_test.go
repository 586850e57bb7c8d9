package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestReleaseWhenQuietWithGarbage: memory is released at a quiet tick when
// the heap holds enough garbage for its live size, whether a burst or a
// trickle left it, and neither while allocation is busy nor with little
// garbage.
func TestReleaseWhenQuietWithGarbage(t *testing.T) {
	for _, live := range []uint64{0, 4 << 20, 64 << 20} {
		enough := max(minGarbageBytes, live/garbageFraction)
		var r idleRelease
		h := heap{live: live}
		releases := 0
		step := func(allocated, garbage uint64) {
			h.allocated += allocated
			h.garbage = garbage
			if releaseHeap, _ := r.observe(h); releaseHeap {
				releases++
				h.garbage = 0 // the full GC collected it
			}
		}
		expect := func(what string, want int) {
			t.Helper()
			if releases != want {
				t.Fatalf("live heap %d: %s: %d releases, want %d", live, what, releases, want)
			}
		}
		for i := range 4 { // a burst: 4 busy ticks
			step(idleBytes, uint64(i+1)*idleBytes)
		}
		expect("during the burst", 0)
		step(0, 4*idleBytes)
		expect("at the first quiet tick", 1)
		step(0, 0)
		expect("while idle", 1)
		step(0, enough-1)
		expect("with garbage just short of enough", 1)
		for range 2 * enough / (idleBytes / 64) { // a trickle of quiet ticks
			if releases == 2 {
				break
			}
			step(idleBytes/64, h.garbage+idleBytes/64)
		}
		expect("once a trickle left enough garbage", 2)
		if h.garbage != 0 || h.allocated < enough {
			t.Fatalf("live heap %d: released with %d allocated since the start", live, h.allocated)
		}
	}
}

// TestBinaryPagesReleasedAfterWork: the binary's pages are released at the
// first quiet tick after some work, whether or not it left garbage (a soft
// memory limit collects it early), not again until more work, and never
// more often than every binaryTicks.
func TestBinaryPagesReleasedAfterWork(t *testing.T) {
	r := idleRelease{sinceBinary: binaryTicks} // as releaseWhenIdle starts
	var h heap
	releases, ticks, lastRelease := 0, 0, -binaryTicks
	step := func(allocated uint64) {
		ticks++
		h.allocated += allocated
		if _, releaseBinary := r.observe(h); releaseBinary {
			if ticks-lastRelease < binaryTicks {
				t.Fatalf("released at tick %d, %d ticks after the last", ticks, ticks-lastRelease)
			}
			releases, lastRelease = releases+1, ticks
		}
	}
	expect := func(what string, want int) {
		t.Helper()
		if releases != want {
			t.Fatalf("%s: %d releases, want %d", what, releases, want)
		}
	}
	step(0)
	expect("idle from the start", 0)
	for range 3 {
		step(idleBytes) // busy, no garbage left
	}
	expect("while busy", 0)
	step(0)
	expect("at the first quiet tick after work", 1)
	for range binaryTicks + 2 {
		step(0)
	}
	expect("while idle", 1)
	for range 7 {
		step(idleBytes / 8)
	}
	expect("with a trickle short of work", 1)
	step(idleBytes / 8)
	expect("once the trickle added up to work", 2)
	// Scrapes that add up to work at every other quiet tick.
	before := releases
	for range 10 * binaryTicks {
		step(idleBytes - 1)
	}
	if n := releases - before; n < 9 || n > 10 {
		t.Fatalf("%d releases in %d quiet ticks with work, want one every %d", n, 10*binaryTicks, binaryTicks)
	}
}

// TestBinaryPagesTurnOffAfterAFailure: a failed release is said once, and
// no release is tried after it.
func TestBinaryPagesTurnOffAfterAFailure(t *testing.T) {
	var logged bytes.Buffer
	calls := 0
	pages := &binaryPages{log: slog.New(slog.NewTextHandler(&logged, nil)), unmap: func() (uint64, error) {
		calls++
		if calls == 2 {
			return 0, errors.New("madvise: operation not permitted")
		}
		return 4096, nil
	}}
	for range 4 {
		pages.release()
	}
	if calls != 2 || strings.Count(logged.String(), "not releasing the binary's pages") != 1 {
		t.Fatalf("%d releases tried, log:\n%s", calls, logged.String())
	}
}
