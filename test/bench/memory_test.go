//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// memory: konglet's RSS and heap with 5,000 routes, Services and
// EndpointSlices, 500 TLS Secrets and 10,000 unrelated 10 KB Secrets.
func (b *bencher) memory(t *testing.T) {
	scen := "4 memory"
	const n, tlsSecrets, opaque = 5000, 500, 10000
	b.ensureApps(t, n)
	start := time.Now()
	if err := b.c.secrets(b.ctx, tlsSecrets, opaque); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d Secrets in %v", tlsSecrets+opaque, time.Since(start).Round(time.Millisecond))
	b.settleStatuses(t)
	b.results.scenario(scen)
	b.memoryRun(t, scen, n, tlsSecrets, opaque, "")
	// The same with a soft memory limit for the Go runtime (an environment
	// variable, no change to konglet): does it keep konglet under 64 MiB?
	b.memoryRun(t, scen, n, tlsSecrets, opaque, "GOMEMLIMIT=48MiB")
	// konglet has no pprof endpoint: the same informers and one sync's
	// snapshot + translation are profiled in this process instead.
	b.profileCache(t, scen)
}

// memoryRun starts konglet (with GODEBUG=gctrace=1 and env), waits for all
// routes served and the status writes over, and samples its memory.
func (b *bencher) memoryRun(t *testing.T, scen string, n, tlsSecrets, opaque int, env string) {
	k := newKong()
	defer k.Close()
	envs := []string{"GODEBUG=gctrace=1"}
	label := ""
	if env != "" {
		envs = append(envs, env)
		label = " [" + env + "]"
	}
	p := b.startKongletEnv(t, k, envs, "--leader-election=false")
	defer p.Stop()
	if !poll(time.Millisecond, 60*time.Second, func() bool { return b.allRoutable(k, n) }) {
		t.Fatal("5,000 routes not served within 60s")
	}
	served := time.Since(p.Started)
	if !quiesce(p, 2*time.Second, 180*time.Second) {
		t.Log("status writes did not stop within 180s")
	}
	settled := time.Since(p.Started)
	heap, rss, file := steadyFile(p, 5*time.Second)
	maxRSS := float64(p.MaxRSS())
	m, _ := p.scrape()
	gcs := p.GC()
	maxLive, lastLive, maxEnd := 0, 0, 0
	for _, c := range gcs {
		maxLive, maxEnd, lastLive = max(maxLive, c.Live), max(maxEnd, c.End), c.Live
	}
	cached := float64(3 * n) // routes, Services, EndpointSlices (no listener names a Secret: none is read)
	b.results.raw("memory"+label, map[string]any{"served_ms": ms(served), "settled_ms": ms(settled), "heap_inuse": heap, "rss": rss, "max_rss": maxRSS,
		"rss_samples": p.RSS(), "gc": gcs, "metrics": m, "baseline": map[string]float64{"heap": base.heap, "rss": base.rss}})
	b.results.add(figure{Scenario: scen, Name: "RSS 5 s after the status writes ended (median over 5 s)" + label, Value: mib(rss), Unit: "MiB", Target: "<= 64 MiB", Met: atMost(rss, 64<<20),
		Note: fmt.Sprintf("of which mapped from the binary %.1f MiB", mib(file))})
	b.results.add(figure{Scenario: scen, Name: "max RSS (start, first load, status writes)" + label, Value: mib(maxRSS), Unit: "MiB", Target: "<= 64 MiB", Met: atMost(maxRSS, 64<<20)})
	b.results.add(figure{Scenario: scen, Name: "Go heap in use then (go_memstats_heap_inuse_bytes)" + label, Value: mib(heap), Unit: "MiB",
		Note: fmt.Sprintf("%d GCs; live heap after the last one %d MB, at most %d MB; heap at most %d MB", len(gcs), lastLive, maxLive, maxEnd)})
	b.results.add(figure{Scenario: scen, Name: "5,000 routes: process start to all routes served" + label, Value: ms(served), Unit: "ms"})
	if env != "" {
		return
	}
	// Nothing allocates once konglet is idle, so no GC runs and the heap of
	// the last sync stays in use: wait for the runtime's periodic GC (every
	// 2 minutes) to see the memory konglet really keeps.
	idleFrom := time.Since(p.Started)
	var forced gcCycle
	if poll(time.Second, 150*time.Second, func() bool {
		for _, c := range p.GC() {
			if c.At > idleFrom {
				forced = c
				return true
			}
		}
		return false
	}) {
		// Give the scavenger a few seconds to return the freed pages.
		_, _ = steady(p, 5*time.Second)
		idleHeap, idleRSS := steady(p, 5*time.Second)
		b.results.add(figure{Scenario: scen, Name: "idle RSS after the runtime's periodic GC (median over 5 s)", Value: mib(idleRSS), Unit: "MiB", Target: "<= 64 MiB", Met: atMost(idleRSS, 64<<20),
			Note: fmt.Sprintf("GC %.0f s after start: live heap %d MB; heap in use then %.1f MiB", forced.At.Seconds(), forced.Live, mib(idleHeap))})
		b.results.add(figure{Scenario: scen, Name: "live heap per cached object after the periodic GC, above the idle baseline", Value: (float64(forced.Live)*(1<<20) - base.heap) / cached, Unit: "bytes",
			Note: fmt.Sprintf("%.0f B per route with its Service and slice", (float64(forced.Live)*(1<<20)-base.heap)/float64(n))})
	} else {
		b.results.note(scen, "no GC within 150 s of idleness: the steady figures above are the heap left by the last sync")
	}
	b.results.add(figure{Scenario: scen, Name: "heap in use per cached object, above the idle baseline", Value: (heap - base.heap) / cached, Unit: "bytes",
		Note: fmt.Sprintf("%.0f objects: routes, Services, EndpointSlices; %.0f B per route with its Service and slice", cached, (heap-base.heap)/float64(n))})
	b.results.add(figure{Scenario: scen, Name: "RSS per cached object, above the idle baseline", Value: (rss - base.rss) / cached, Unit: "bytes"})
	b.results.note(scen, "objects in the cluster: %d HTTPRoutes, %d Services and EndpointSlices (3 endpoints each), %d TLS Secrets, %d Opaque Secrets of 10 KB (none read by konglet: no listener names them)",
		n, b.apps, tlsSecrets, opaque)
	b.results.note(scen, "go_memstats at steady state: heap_inuse %.1f MiB, heap_idle %.1f MiB, heap_released %.1f MiB, sys %.1f MiB, next_gc %.1f MiB",
		mib(m["go_memstats_heap_inuse_bytes"]), mib(m["go_memstats_heap_idle_bytes"]), mib(m["go_memstats_heap_released_bytes"]),
		mib(m["go_memstats_sys_bytes"]), mib(m["go_memstats_next_gc_bytes"]))
}

// profileCache builds konglet's informer cache in this process, writes a heap
// profile of it, and measures what one sync allocates.
func (b *bencher) profileCache(t *testing.T, scen string) {
	dir := resultsDir()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	c := b.inProcessCache(ctx, t, nil)
	runtime.GC() // the heap profile is as of the last GC
	f, err := os.Create(filepath.Join(dir, "cache.heap.pprof"))
	if err == nil {
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}
	snap, err := c.Snapshot(snapshot.DefaultKong(snapshot.RouterExpressions))
	if err != nil {
		t.Fatal(err)
	}
	var s0, s1 runtime.MemStats
	runtime.ReadMemStats(&s0)
	res := translate.Translate(snap, nil)
	doc, err := declarative.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&s1)
	// What the informers hold: the decoded objects (allocated while
	// decoding the watch stream) and the stores, from the heap profile.
	cacheHeap := profileTotal(filepath.Join(dir, "cache.heap.pprof"), `StreamWatcher|client-go/tools/cache`)
	syncAlloc := float64(s1.TotalAlloc - s0.TotalAlloc)
	b.results.add(figure{Scenario: scen, Name: "in-process: konglet's informer caches (heap profile: decoded objects and stores)", Value: mib(cacheHeap), Unit: "MiB"})
	b.results.add(figure{Scenario: scen, Name: "in-process: one sync's translation + marshal allocates", Value: mib(syncAlloc), Unit: "MiB",
		Note: fmt.Sprintf("document %.1f MiB", mib(float64(len(doc))))})
	// What the sidecar's translation Memo keeps alive between syncs.
	var memo translate.Memo
	runtime.GC()
	runtime.ReadMemStats(&s0)
	memo.Translate(snap, nil)
	runtime.GC()
	runtime.ReadMemStats(&s1)
	memoKept := float64(s1.HeapAlloc) - float64(s0.HeapAlloc)
	runtime.KeepAlive(&memo)
	b.results.add(figure{Scenario: scen, Name: "in-process: what the translation Memo keeps between syncs", Value: mib(memoKept), Unit: "MiB",
		Note: fmt.Sprintf("%.0f B per route", memoKept/float64(len(snap.HTTPRoutes)))})
	b.results.raw("memory_profile", map[string]any{"cache_heap": cacheHeap, "sync_alloc": syncAlloc, "doc_bytes": len(doc), "memo_kept": memoKept})
	if top, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=30", filepath.Join(dir, "cache.heap.pprof")).CombinedOutput(); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "cache.heap.top.txt"), top, 0o644)
	}
	b.results.note(scen, "heap profile of konglet's informer caches built in the test process: results/cache.heap.pprof (top: cache.heap.top.txt)")
}

var pprofTotal = regexp.MustCompile(`Showing nodes accounting for ([0-9.]+)([kMG]?B)`)

// profileTotal is the in-use bytes of a heap profile under stacks matching
// focus (0 when pprof cannot tell).
func profileTotal(profile, focus string) float64 {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-focus="+focus, profile).CombinedOutput()
	if err != nil {
		return 0
	}
	m := pprofTotal.FindSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	switch string(m[2]) {
	case "kB":
		v *= 1 << 10
	case "MB":
		v *= 1 << 20
	case "GB":
		v *= 1 << 30
	}
	return v
}
