//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
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
	k := newKong()
	defer k.Close()
	p := b.startKonglet(t, k, "--leader-election=false")
	if !poll(time.Millisecond, 60*time.Second, func() bool { return b.allRoutable(k, n) }) {
		t.Fatal("5,000 routes not served within 60s")
	}
	served := time.Since(p.Started)
	if !quiesce(p, 2*time.Second, 180*time.Second) {
		t.Log("status writes did not stop within 180s")
	}
	settled := time.Since(p.Started)
	heap, rss := steady(p, 5*time.Second)
	maxRSS := float64(p.MaxRSS())
	m, _ := p.scrape()
	cached := float64(3*n + tlsSecrets) // routes, Services, EndpointSlices, TLS Secrets (the Opaque ones are not cached)
	b.results.raw("memory", map[string]any{"served_ms": ms(served), "settled_ms": ms(settled), "heap_inuse": heap, "rss": rss, "max_rss": maxRSS,
		"rss_samples": p.RSS(), "metrics": m, "baseline": map[string]float64{"heap": base.heap, "rss": base.rss}})
	b.results.add(figure{Scenario: scen, Name: "steady RSS (median over 5 s, after status writes ended)", Value: mib(rss), Unit: "MiB", Target: "<= 64 MiB", Met: atMost(rss, 64<<20)})
	b.results.add(figure{Scenario: scen, Name: "max RSS (start, first load, status writes)", Value: mib(maxRSS), Unit: "MiB", Target: "<= 64 MiB", Met: atMost(maxRSS, 64<<20)})
	b.results.add(figure{Scenario: scen, Name: "steady Go heap in use (go_memstats_heap_inuse_bytes)", Value: mib(heap), Unit: "MiB"})
	b.results.add(figure{Scenario: scen, Name: "heap per cached object, above the idle baseline", Value: (heap - base.heap) / cached, Unit: "bytes",
		Note: fmt.Sprintf("%.0f objects: routes, Services, EndpointSlices, TLS Secrets; %.0f B per route with its Service and slice", cached, (heap-base.heap)/n)})
	b.results.add(figure{Scenario: scen, Name: "RSS per cached object, above the idle baseline", Value: (rss - base.rss) / cached, Unit: "bytes"})
	b.results.add(figure{Scenario: scen, Name: "5,000 routes: process start to all routes served", Value: ms(served), Unit: "ms"})
	b.results.note(scen, "objects in the cluster: %d HTTPRoutes, %d Services and EndpointSlices (3 endpoints each), %d TLS Secrets, %d Opaque Secrets of 10 KB (not cached by konglet: field selector on type)",
		n, b.apps, tlsSecrets, opaque)
	b.results.note(scen, "go_memstats at steady state: heap_inuse %.1f MiB, heap_idle %.1f MiB, heap_released %.1f MiB, sys %.1f MiB, next_gc %.1f MiB",
		mib(m["go_memstats_heap_inuse_bytes"]), mib(m["go_memstats_heap_idle_bytes"]), mib(m["go_memstats_heap_released_bytes"]),
		mib(m["go_memstats_sys_bytes"]), mib(m["go_memstats_next_gc_bytes"]))
	p.Stop()
	// konglet has no pprof endpoint: the same informers and one sync's
	// snapshot + translation are profiled in this process instead.
	b.profileCache(t, scen)
}

// profileCache builds konglet's informer cache in this process, writes a heap
// profile of it, and measures what one sync allocates.
func (b *bencher) profileCache(t *testing.T, scen string) {
	dir := resultsDir()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := b.inProcessCache(ctx, t)
	runtime.GC()
	var synced runtime.MemStats
	runtime.ReadMemStats(&synced)
	f, err := os.Create(filepath.Join(dir, "cache.heap.pprof"))
	if err == nil {
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}
	snap, err := c.Snapshot(controllerName, snapshot.DefaultKong(snapshot.RouterExpressions), false)
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
	cacheHeap := float64(synced.HeapAlloc) - float64(before.HeapAlloc)
	syncAlloc := float64(s1.TotalAlloc - s0.TotalAlloc)
	b.results.add(figure{Scenario: scen, Name: "in-process: informer caches, live heap after GC", Value: mib(cacheHeap), Unit: "MiB"})
	b.results.add(figure{Scenario: scen, Name: "in-process: one sync's translation + marshal allocates", Value: mib(syncAlloc), Unit: "MiB",
		Note: fmt.Sprintf("document %.1f MiB, sent again wrapped in {\"config\": ...}", mib(float64(len(doc))))})
	b.results.raw("memory_profile", map[string]any{"cache_heap": cacheHeap, "sync_alloc": syncAlloc, "doc_bytes": len(doc)})
	if top, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=30", filepath.Join(dir, "cache.heap.pprof")).CombinedOutput(); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "cache.heap.top.txt"), top, 0o644)
	}
	b.results.note(scen, "heap profile of konglet's informer caches built in the test process: results/cache.heap.pprof (top: cache.heap.top.txt)")
}
