package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// konglet works in bursts (a sync, the status writes after it, a relist)
// and then idles, often for minutes. The garbage of a burst stays in the
// heap until the next collection, which an idle process only gets from the
// runtime's periodic GC every two minutes, and the runtime then returns the
// freed pages to the system slowly: every replica of a fleet would sit at
// its peak. So once allocation goes quiet with garbage in the heap,
// konglet collects and returns the memory at once (a full GC: tens of
// milliseconds with thousands of routes). Garbage rather than a burst's
// allocation decides: the status writes and scrapes that follow a sync add
// garbage after the first quiet second, and the heap would keep it.
const (
	// releaseTick is how often allocation is sampled; a tick with less
	// than idleBytes allocated is quiet (keep-alives, metrics scrapes and
	// Kong's hash poll allocate a little all the time: a scrape of
	// /metrics about 200 KB, so that even ten a second stay quiet).
	releaseTick = time.Second
	idleBytes   = 4 << 20
	// A release is worth it once the garbage is a sixteenth of the live
	// heap, and at least minGarbageBytes: an idle replica then stays
	// within about 6% of what it keeps (a sync of 5,000 routes leaves tens
	// of MiB), and the full GCs cost about what the runtime's own would
	// with GOGC=6, while idle only.
	minGarbageBytes = 1 << 20
	garbageFraction = 16
	// The binary's pages are released at most every binaryTicks: each
	// release reads smaps, and the next sync maps its code back in (by
	// hand: a sync of 3,300 routes took about 1 ms more right after one),
	// so ten releases a minute cost next to nothing even when scrapes add
	// up to work every tick.
	binaryTicks = 6
)

// releaseWhenIdle returns freed memory to the system at each quiet tick
// with enough garbage in the heap, and the pages of the binary at each quiet
// tick after some work (pages; nil: never), until ctx ends.
func releaseWhenIdle(ctx context.Context, pages *binaryPages) {
	tick := time.NewTicker(releaseTick)
	defer tick.Stop()
	s := heapSample()
	// No release before: the first quiet tick after the first sync may
	// release what it touched (a sync of a few routes is done in a tick).
	r := idleRelease{last: s.allocated, lastBinary: s.allocated, sinceBinary: binaryTicks}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		releaseHeap, releaseBinary := r.observe(heapSample())
		if releaseHeap {
			debug.FreeOSMemory()
		}
		if releaseBinary && pages != nil {
			pages.release()
		}
	}
}

// binaryPages releases the pages of konglet's binary (releaseBinaryPages):
// at the quiet ticks of releaseWhenIdle, and once the start is over (the
// caches synced: flags, clients and the scheme of every API group are set
// up, and what they touched is not touched again), so that the first sync,
// konglet's peak, runs without them. A failure turns it off, said once.
type binaryPages struct {
	log    *slog.Logger
	unmap  func() (uint64, error) // releaseBinaryPages but in tests
	failed atomic.Bool
}

func (b *binaryPages) release() {
	if b.failed.Load() {
		return
	}
	unmapped, err := b.unmap()
	if err != nil {
		if !b.failed.Swap(true) {
			b.log.Warn("not releasing the binary's pages", "error", err)
		}
		return
	}
	b.log.Debug("binary's pages released", "unmappedBytes", unmapped)
}

// idleRelease tells, from the heap sampled every tick, when to release.
type idleRelease struct {
	last       uint64 // bytes allocated on the heap since the start, at the last tick
	lastBinary uint64 // the same, at the last release of the binary's pages
	// sinceBinary counts the ticks since that release: they are at least
	// binaryTicks apart, however busy the scrapes keep the heap.
	sinceBinary int
}

// heap is one sample of the runtime's heap.
type heap struct {
	allocated uint64 // since the start
	garbage   uint64 // in the heap: objects not live at the last GC (an estimate: some are new and live)
	live      uint64 // at the last GC
}

// observe takes one sample and tells whether to release the heap's free
// memory now, and the binary's pages. The binary's go at a quiet tick once
// idleBytes were allocated since they last went, whatever the garbage (a
// soft memory limit makes the runtime collect often, so that garbage never
// piles up): work touched code that idleness does not use.
func (r *idleRelease) observe(h heap) (releaseHeap, releaseBinary bool) {
	delta := h.allocated - r.last
	r.last = h.allocated
	r.sinceBinary++
	quiet := delta < idleBytes
	releaseHeap = quiet && h.garbage >= max(minGarbageBytes, h.live/garbageFraction)
	releaseBinary = quiet && h.allocated-r.lastBinary >= idleBytes && r.sinceBinary >= binaryTicks
	if releaseBinary {
		r.lastBinary, r.sinceBinary = h.allocated, 0
	}
	return releaseHeap, releaseBinary
}

// heapSample reads the runtime's heap metrics (cheap: no stop-the-world,
// unlike runtime.ReadMemStats).
func heapSample() heap {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	h := heap{allocated: s[0].Value.Uint64(), live: s[2].Value.Uint64()}
	if objects := s[1].Value.Uint64(); objects > h.live {
		h.garbage = objects - h.live
	}
	return h
}
