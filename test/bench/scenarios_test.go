//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// steady samples konglet for window: the median heap in use (from its
// /metrics) and the median RSS over that window.
func steady(p *proc, window time.Duration) (heap, rss float64) {
	heap, rss, _ = steadyFile(p, window)
	return heap, rss
}

// steadyFile is steady with the median of the RSS mapped from files (the
// binary's pages) too.
func steadyFile(p *proc, window time.Duration) (heap, rss, file float64) {
	from := time.Since(p.Started)
	var heaps []float64
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	end := time.NewTimer(window)
	defer end.Stop()
loop:
	for {
		if v := p.metric("go_memstats_heap_inuse_bytes"); v > 0 {
			heaps = append(heaps, v)
		}
		select {
		case <-end.C:
			break loop
		case <-tick.C:
		}
	}
	var rs, files []float64
	for _, s := range p.RSS() {
		if s.At >= from {
			rs, files = append(rs, float64(s.Bytes)), append(files, float64(s.File))
		}
	}
	return median(heaps), median(rs), median(files)
}

// baseline: konglet with a Gateway and no routes, for the memory per object.
type baselineMem struct{ heap, rss float64 }

var base baselineMem

func (b *bencher) baseline(t *testing.T) {
	scen := "0 baseline"
	b.results.scenario(scen)
	// The very first konglet after the API server started waits for it to
	// warm up (about a second, a test artifact): measured apart.
	warm := newKong()
	wp := b.startKonglet(t, warm, "--leader-election=false")
	if !poll(time.Millisecond, 30*time.Second, func() bool { return warm.Loads() >= 1 }) {
		t.Fatal("konglet never loaded a configuration")
	}
	b.results.add(figure{Scenario: scen, Name: "first konglet after the API server started: start to first load (warm-up, not a konglet figure)", Value: ms(time.Since(wp.Started)), Unit: "ms"})
	wp.Stop()
	warm.Close()

	k := newKong()
	defer k.Close()
	p := b.startKonglet(t, k, "--leader-election=false")
	if !poll(time.Millisecond, 30*time.Second, func() bool { return k.Loads() >= 1 }) {
		t.Fatal("konglet never loaded a configuration")
	}
	first := time.Since(p.Started)
	if d, ok := p.logTime("caches synced"); ok {
		b.results.add(figure{Scenario: scen, Name: "konglet logged \"caches synced\" after", Value: ms(d), Unit: "ms"})
	}
	if !quiesce(p, time.Second, 30*time.Second) {
		t.Log("status writes did not stop within 30s")
	}
	var file float64
	base.heap, base.rss, file = steadyFile(p, 3*time.Second)
	b.results.add(figure{Scenario: scen, Name: "start to first load, no routes", Value: ms(first), Unit: "ms"})
	b.results.add(figure{Scenario: scen, Name: "idle RSS, no routes (median)", Value: mib(base.rss), Unit: "MiB",
		Note: fmt.Sprintf("of which mapped from the binary %.1f MiB", mib(file))})
	b.results.add(figure{Scenario: scen, Name: "idle Go heap in use, no routes", Value: mib(base.heap), Unit: "MiB"})
	b.results.raw("baseline", map[string]any{"first_load_ms": ms(first), "heap_inuse": base.heap, "rss": base.rss, "max_rss": p.MaxRSS()})
}

// coldStart: process start to a loaded configuration holding every route.
func (b *bencher) coldStart(t *testing.T, n int, target time.Duration) {
	scen := fmt.Sprintf("5 cold start %dk", n/1000)
	b.ensureApps(t, n)
	b.shrinkRoutes(t, n)
	b.results.scenario(scen)
	k := newKong()
	defer k.Close()
	p := b.startKonglet(t, k, "--leader-election=false")
	var ready, failedAt time.Duration
	lastLoads := -1
	var lastScrape time.Time
	var failure string
	ok := poll(time.Millisecond, 60*time.Second, func() bool {
		if l := k.Loads(); l != lastLoads {
			lastLoads = l
			if b.allRoutable(k, n) {
				ready = time.Since(p.Started)
				return true
			}
		}
		// A configuration konglet will not send, or that Kong refuses, is
		// never going to load: stop at the first such attempt.
		if time.Since(lastScrape) >= 100*time.Millisecond {
			lastScrape = time.Now()
			m, err := p.scrape()
			if err == nil && m[`konglet_kong_pushes_total{result="failed"}`]+m[`konglet_kong_pushes_total{result="refused"}`] > 0 {
				failedAt = time.Since(p.Started)
				failure = fmt.Sprintf("konglet_config_bytes=%.0f (%.2f MiB, --max-config-bytes is 10 MiB); POST /config answers: %v", m["konglet_config_bytes"], mib(m["konglet_config_bytes"]), postStatuses(k))
				if ps := k.Posts(); len(ps) > 0 {
					failure += fmt.Sprintf(" to a body of %d bytes (%.2f MiB; Kong's limit is 10 MiB)", ps[0].Bytes, mib(float64(ps[0].Bytes)))
				}
				if lines := p.LogsContaining("sync failed"); len(lines) > 0 {
					failure += "; konglet: " + lines[0]
				}
				return true
			}
		}
		return false
	})
	posts := k.Posts()
	configBytes, maxRSS := p.metric("konglet_config_bytes"), p.MaxRSS()
	raw := map[string]any{"routes": n, "ready_ms": ms(ready), "posts": posts, "max_rss": maxRSS, "config_bytes": configBytes}
	b.results.raw("coldstart", raw)
	name := fmt.Sprintf("%d routes: process start to all routes served", n)
	tgt := fmt.Sprintf("<= %v", target)
	switch {
	case ready > 0:
		b.results.add(figure{Scenario: scen, Name: name, Value: ms(ready), Unit: "ms", Target: tgt, Met: atMost(ms(ready), ms(target))})
		if pst, ok := k.postAt(p.Started.Add(ready)); ok {
			b.results.add(figure{Scenario: scen, Name: "of which konglet: start to POST /config arriving (list, translate, marshal)", Value: ms(pst.Start.Sub(p.Started)), Unit: "ms",
				Note: fmt.Sprintf("POST number %d", countBefore(posts, pst.Start)+1)})
			b.results.add(figure{Scenario: scen, Name: "of which the double: POST /config arriving to all routes served", Value: ms(ready - pst.Start.Sub(p.Started)), Unit: "ms",
				Note: fmt.Sprintf("%.1f MiB body", mib(float64(pst.Bytes)))})
		}
	case failedAt > 0:
		b.results.add(figure{Scenario: scen, Name: name, Missing: true, Unit: "ms", Target: tgt, Met: boolPtr(false),
			Note: fmt.Sprintf("never: the load failed, first failure seen %.0f ms after start", ms(failedAt))})
		b.results.note(scen, "%d routes cannot be loaded: %s", n, failure)
	default:
		b.results.add(figure{Scenario: scen, Name: name, Missing: true, Unit: "ms", Target: tgt, Met: boolPtr(false), Note: "not within 60 s"})
		t.Errorf("%d routes were not all served within 60s (ok=%v)", n, ok)
	}
	b.results.add(figure{Scenario: scen, Name: fmt.Sprintf("%d routes: config document size", n), Value: mib(configBytes), Unit: "MiB",
		Target: "<= 10 MiB", Met: atMost(configBytes, 10<<20), Note: fmt.Sprintf("%.0f B per route", configBytes/float64(n))})
	b.results.add(figure{Scenario: scen, Name: fmt.Sprintf("%d routes: max RSS during cold start", n), Value: mib(float64(maxRSS)), Unit: "MiB"})
	if d, ok := p.logTime("caches synced"); ok {
		b.results.add(figure{Scenario: scen, Name: "konglet logged \"caches synced\" after", Value: ms(d), Unit: "ms"})
	}
	p.Stop()
	// Where the informers' time goes: the same caches in this process, with
	// konglet's client rate limit (client-go's default) and with a high one.
	slow := b.cacheSyncTime(t, 0, 0)
	fast := b.cacheSyncTime(t, 500, 1000)
	b.results.add(figure{Scenario: scen, Name: "in-process: konglet's informers synced, client-go default rate limit (QPS 5, burst 10)", Value: ms(slow), Unit: "ms"})
	b.results.add(figure{Scenario: scen, Name: "in-process: the same informers synced with QPS 500, burst 1000", Value: ms(fast), Unit: "ms"})
}

func postStatuses(k *kong) []int {
	var out []int
	for _, p := range k.Posts() {
		out = append(out, p.Status)
	}
	return out
}

// propagationAndBurst: 3,000 routes served, then 300 created one by one
// (propagation), then 1,000 edits at 100/s (burst). Twice: as a follower
// replica (another replica holds the status Lease: no status writes, the
// config path alone) and as the status writer (--leader-election=false,
// what a single replica does), on a cluster whose statuses are settled.
func (b *bencher) propagationAndBurst(t *testing.T) {
	const first, added = 3000, 300
	b.ensureApps(t, first)
	if err := parallel(first, first+added, func(i int) error { return b.c.createBackend(b.ctx, i) }); err != nil {
		t.Fatal(err)
	}
	for _, role := range []struct {
		name    string
		round   int
		samples int
		args    []string
	}{
		// The follower creates 100 (the time budget), the status writer 300.
		{"follower", 1, 100, nil},
		{"status writer", 2, added, []string{"--leader-election=false"}},
	} {
		if role.round == 1 {
			b.holdLease(t)
		} else {
			b.releaseLease(t)
			b.settleStatuses(t)
		}
		scen := "2 propagation, " + role.name
		b.results.scenario(scen)
		k := newKong()
		p := b.startKonglet(t, k, role.args...)
		if !poll(time.Millisecond, 60*time.Second, func() bool { return b.allRoutable(k, first) }) {
			t.Fatal("3,000 routes not served within 60s")
		}
		served := time.Since(p.Started)
		quiesce(p, time.Second, 60*time.Second)
		b.results.note(scen, "%d routes created one by one", role.samples)
		b.results.note(scen, "konglet served the 3,000 routes %.0f ms after start; %.0f status writes before the 300 creations began %.1f s after start",
			ms(served), p.metric("konglet_status_writes_total"), time.Since(p.Started).Seconds())
		b.propagate(t, scen, k, p, first, role.samples)
		if role.round == 2 {
			// Let the status writes of the creations end: the burst starts
			// from a quiet konglet.
			quiesce(p, time.Second, 120*time.Second)
		}
		b.burst(t, "3 burst, "+role.name, k, p, role.round)
		p.Stop()
		if role.round == 1 {
			if cold, warm, err := doubleCost(k.RawConfig()); err == nil {
				b.results.add(figure{Scenario: scen, Name: "the double alone: POST /config of the 3,300-route document to a fresh double (median of 3, konglet stopped)", Value: ms(cold), Unit: "ms"})
				b.results.add(figure{Scenario: scen, Name: "the double alone: the same with one route changed, to a double that holds it (median of 3)", Value: ms(warm), Unit: "ms"})
			} else {
				b.results.note(scen, "the double alone could not be measured: %v", err)
			}
		}
		k.Close()
		if role.round == 1 {
			// The follower's routes go again: the status writer starts
			// from the same 3,000.
			if err := parallel(first, first+role.samples, func(i int) error {
				return retry(func() error {
					return b.c.gw.GatewayV1().HTTPRoutes(appNS(i)).Delete(b.ctx, routeName(i), metav1.DeleteOptions{})
				})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.hosts = append(b.hosts, make([]string, added)...)
	for i := first; i < first+added; i++ {
		b.hosts[i] = host(i)
	}
	b.apps = first + added
}

// propagate creates routes [first, first+added) one by one and times each
// from its Create returning to the double routing its host.
func (b *bencher) propagate(t *testing.T, scen string, k *kong, p *proc, first, added int) {
	writes0 := p.metric("konglet_status_writes_total")
	lost0, loads0 := p.metric("konglet_kong_config_lost_total"), k.Loads()
	var lat, kongletPart, doublePart []time.Duration
	type sampleRec struct {
		Route                          int
		LatencyMS, KongletMS, DoubleMS float64
	}
	var recs []sampleRec
	for i := first; i < first+added; i++ {
		// One by one: the previous load is over (the double has answered)
		// before the next route is created, so that each sample is one
		// change going through an idle konglet and an idle double.
		if !poll(time.Millisecond, 30*time.Second, k.idle) {
			t.Fatal("the double still handling a POST /config after 30s")
		}
		if err := b.c.createRoute(b.ctx, i); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		lastLoads := -1
		var seen time.Time
		ok := poll(time.Millisecond, 30*time.Second, func() bool {
			l := k.Loads()
			if l == lastLoads {
				return false
			}
			lastLoads = l
			if k.routes(host(i)) {
				seen = time.Now()
				return true
			}
			return false
		})
		if !ok {
			t.Fatalf("route %d not served within 30s", i)
		}
		d := seen.Sub(t0)
		lat = append(lat, d)
		rec := sampleRec{Route: i, LatencyMS: ms(d)}
		if pst, ok := k.postAt(seen); ok {
			kongletPart = append(kongletPart, pst.Start.Sub(t0))
			doublePart = append(doublePart, seen.Sub(pst.Start))
			rec.KongletMS, rec.DoubleMS = ms(pst.Start.Sub(t0)), ms(seen.Sub(pst.Start))
		}
		recs = append(recs, rec)
	}
	b.results.raw(scen, recs)
	slices.Sort(lat)
	slices.Sort(kongletPart)
	slices.Sort(doublePart)
	for _, q := range []struct {
		name   string
		p      float64
		target float64
	}{{"p50", 50, 30}, {"p90", 90, 0}, {"p99", 99, 100}, {"max", 100, 0}} {
		v := ms(percentile(lat, q.p))
		f := figure{Scenario: scen, Name: "Create returned to Kong routing the new host, " + q.name, Value: v, Unit: "ms"}
		if q.target > 0 {
			f.Target, f.Met = fmt.Sprintf("<= %.0f ms", q.target), atMost(v, q.target)
		}
		b.results.add(f)
	}
	for _, part := range []struct {
		name string
		d    []time.Duration
	}{
		{"of which konglet: Create returned to POST /config arriving at Kong", kongletPart},
		{"of which the double: POST /config arriving to the new route served (parse, validate, build router)", doublePart},
	} {
		b.results.add(figure{Scenario: scen, Name: part.name + ", p50", Value: ms(percentile(part.d, 50)), Unit: "ms",
			Note: fmt.Sprintf("p90 %.1f ms, p99 %.1f ms, max %.1f ms", ms(percentile(part.d, 90)), ms(percentile(part.d, 99)), ms(percentile(part.d, 100)))})
	}
	b.results.add(figure{Scenario: scen, Name: "status writes during the creations", Value: p.metric("konglet_status_writes_total") - writes0, Unit: "writes"})
	b.results.add(figure{Scenario: scen, Name: "config loads for the creations", Value: float64(k.Loads() - loads0), Unit: "loads",
		Note: fmt.Sprintf("konglet_kong_config_lost_total +%.0f, though the double never lost its configuration", p.metric("konglet_kong_config_lost_total")-lost0)})
	b.results.add(figure{Scenario: scen, Name: "config document with 3,300 routes", Value: mib(p.metric("konglet_config_bytes")), Unit: "MiB"})
}

// burst: 1,000 hostname edits of existing routes at 100/s.
func (b *bencher) burst(t *testing.T, scen string, k *kong, p *proc, round int) {
	b.results.scenario(scen)
	const edits = 1000
	loads0, posts0 := k.Loads(), len(k.Posts())
	writes0 := p.metric("konglet_status_writes_total")
	lost0 := p.metric("konglet_kong_config_lost_total")
	returned := make([]time.Time, edits)
	errs := make([]error, edits)
	ch := make(chan int, edits)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				patch := fmt.Sprintf(`{"spec":{"hostnames":[%q]}}`, editHost(i, round))
				_, errs[i] = b.c.gw.GatewayV1().HTTPRoutes(appNS(i)).Patch(b.ctx, routeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				returned[i] = time.Now()
			}
		}()
	}
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	for i := range edits {
		if i > 0 {
			<-tick.C
		}
		ch <- i
	}
	tick.Stop()
	close(ch)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
	last := 0
	for i := range returned {
		if returned[i].After(returned[last]) {
			last = i
		}
	}
	lastEdit := returned[last]
	old := func(i int) string { return b.hosts[i] }
	lastLoads := -1
	var seen time.Time
	const deadline = 120 * time.Second
	ok := poll(time.Millisecond, deadline, func() bool {
		l := k.Loads()
		if l == lastLoads {
			return false
		}
		lastLoads = l
		if !k.routes(editHost(last, round)) || k.routes(old(last)) {
			return false
		}
		hosts := k.Hosts()
		for i := range edits {
			if !hosts[editHost(i, round)] || hosts[old(i)] {
				return false
			}
		}
		seen = time.Now()
		return true
	})
	for i := range edits {
		b.hosts[i] = editHost(i, round)
	}
	loadsAtFinal := k.Loads() - loads0
	loadsAfter := 0
	if ok {
		// Watch one more second for loads after the final configuration.
		after := time.NewTimer(time.Second)
		<-after.C
		loadsAfter = k.Loads() - loads0 - loadsAtFinal
	}
	posts := k.Posts()[posts0:]
	window := lastEdit.Sub(start)
	allowed := math.Ceil(float64(window)/float64(80*time.Millisecond)) + 5
	var postDur, gaps []time.Duration
	for i, pst := range posts {
		postDur = append(postDur, pst.End.Sub(pst.Start))
		if i > 0 {
			gaps = append(gaps, pst.Start.Sub(posts[i-1].End))
		}
	}
	slices.Sort(postDur)
	slices.Sort(gaps)
	writes := p.metric("konglet_status_writes_total") - writes0
	b.results.raw(scen, map[string]any{"edits": edits, "window_ms": ms(window), "loads_to_final": loadsAtFinal, "loads_after": loadsAfter,
		"final_ms": ms(seen.Sub(lastEdit)), "final_reached": ok, "posts": posts, "status_writes": writes})
	b.results.add(figure{Scenario: scen, Name: "1,000 edits sent over (the test aims at 100/s; the API server sets the pace)", Value: window.Seconds(), Unit: "s"})
	b.results.add(figure{Scenario: scen, Name: "config loads, first edit to final config", Value: float64(loadsAtFinal), Unit: "loads",
		Target: fmt.Sprintf("<= %.0f (one per 80 ms + 5)", allowed), Met: atMost(float64(loadsAtFinal), allowed),
		Note: fmt.Sprintf("+%d in the second after; konglet_kong_config_lost_total +%.0f", loadsAfter, p.metric("konglet_kong_config_lost_total")-lost0)})
	if ok {
		final := seen.Sub(lastEdit)
		b.results.add(figure{Scenario: scen, Name: "last edit returned to Kong routing all edits", Value: ms(final), Unit: "ms", Target: "<= 200 ms", Met: atMost(ms(final), 200)})
	} else {
		b.results.add(figure{Scenario: scen, Name: "last edit returned to Kong routing all edits", Value: ms(deadline), Unit: "ms", Target: "<= 200 ms", Met: boolPtr(false),
			Note: "not reached: deadline of the measurement"})
	}
	if fp, found := k.postAt(seen); ok && found {
		b.results.add(figure{Scenario: scen, Name: "of which konglet: last edit returned to the final POST /config arriving", Value: ms(fp.Start.Sub(lastEdit)), Unit: "ms"})
		b.results.add(figure{Scenario: scen, Name: "of which the double: final POST /config arriving to all edits served", Value: ms(seen.Sub(fp.Start)), Unit: "ms"})
	}
	b.results.add(figure{Scenario: scen, Name: "mean time between loads during the burst", Value: ms(window) / math.Max(1, float64(loadsAtFinal)), Unit: "ms",
		Note: fmt.Sprintf("POST /config p50 %.0f ms, gap between POSTs p50 %.0f ms", ms(percentile(postDur, 50)), ms(percentile(gaps, 50)))})
	b.results.add(figure{Scenario: scen, Name: "status writes from the first edit to the final config", Value: writes, Unit: "writes"})
}

func countBefore(posts []post, t time.Time) int {
	n := 0
	for _, p := range posts {
		if p.Start.Before(t) {
			n++
		}
	}
	return n
}

// shrinkRoutes deletes the routes of applications [n, b.apps) (their
// Services and EndpointSlices stay; konglet makes nothing of them).
func (b *bencher) shrinkRoutes(t *testing.T, n int) {
	t.Helper()
	if b.apps <= n {
		return
	}
	if err := parallel(n, b.apps, func(i int) error {
		return retry(func() error {
			return b.c.gw.GatewayV1().HTTPRoutes(appNS(i)).Delete(b.ctx, routeName(i), metav1.DeleteOptions{})
		})
	}); err != nil {
		t.Fatalf("deleting routes %d to %d: %v", n, b.apps, err)
	}
	b.apps = n
	b.hosts = b.hosts[:n]
}
