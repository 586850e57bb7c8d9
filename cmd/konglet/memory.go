package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// konglet works in bursts (a sync, the status writes after it, a relist)
// and then idles, often for minutes. The garbage of a burst stays in the
// heap until the next collection, which an idle process only gets from the
// runtime's periodic GC every two minutes, and the runtime then returns the
// freed pages to the system slowly: every replica of a fleet would sit at
// its peak. So once a burst is over, konglet collects and returns the
// memory at once (a full GC: tens of milliseconds with thousands of routes,
// once per burst).
const (
	// releaseTick is how often allocation is sampled; a tick with less
	// than idleBytes allocated is idle (keep-alives, metrics scrapes and
	// Kong's hash poll allocate a little all the time).
	releaseTick = time.Second
	idleBytes   = 1 << 20
	// burstBytes is the allocation in busy ticks since the last release
	// that makes one worth it (a sync of 5,000 routes allocates about
	// 10 MiB); a trickle is left to the runtime's own collections.
	burstBytes = 8 << 20
)

// releaseWhenIdle returns freed memory to the system each time allocation
// goes quiet after a burst of at least burstBytes (until ctx ends).
func releaseWhenIdle(ctx context.Context) {
	tick := time.NewTicker(releaseTick)
	defer tick.Stop()
	r := idleRelease{last: heapAllocated()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if r.observe(heapAllocated()) {
			debug.FreeOSMemory()
		}
	}
}

// idleRelease tells, from the heap allocation sampled every tick, when to
// release.
type idleRelease struct {
	last         uint64 // bytes allocated on the heap since the start, at the last tick
	sinceRelease uint64 // allocated in busy ticks since the last release
}

// observe takes one sample and tells whether to release now.
func (r *idleRelease) observe(allocated uint64) bool {
	delta := allocated - r.last
	r.last = allocated
	if delta >= idleBytes {
		r.sinceRelease += delta
		return false
	}
	if r.sinceRelease < burstBytes {
		return false
	}
	r.sinceRelease = 0
	return true
}

// heapAllocated reads the runtime's cumulative heap allocation (cheap: no
// stop-the-world, unlike runtime.ReadMemStats).
func heapAllocated() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
