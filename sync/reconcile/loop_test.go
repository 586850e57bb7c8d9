package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/proxy/declarative"
)

func TestBackoffIsCappedJitteredAndHonoursRetryAfter(t *testing.T) {
	l := New(nil, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()),
		Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	var last time.Duration
	for i := range 12 {
		d := l.backoff(errors.New("kong down"))
		want := min(100*time.Millisecond<<i, time.Second)
		if d < want/2 || d > want {
			t.Fatalf("failure %d: backoff %v, want within [%v, %v]", i+1, d, want/2, want)
		}
		last = d
	}
	if last > time.Second {
		t.Fatalf("backoff %v above the cap", last)
	}
	if d := l.backoff(&admin.LoadError{StatusCode: 429, RetryAfter: 3 * time.Second}); d != 3*time.Second {
		t.Fatalf("Retry-After 3s gave %v", d)
	}
}

func TestKongFromInfo(t *testing.T) {
	k := KongFromInfo(admin.Info{Version: "3.9.0", RouterFlavor: "expressions", PortMaps: map[int]int{80: 8000},
		ProxyListeners:  []admin.Listen{{Port: 8000}, {Port: 8443, SSL: true, HTTP2: true}},
		StreamListeners: []admin.Listen{{Port: 9053, UDP: true}},
		EnabledPlugins:  map[string]bool{"cors": true}})
	if !k.PluginEnabled("cors") || k.PluginEnabled("redirect") || len(k.ProxyListens) != 2 || !k.ProxyListens[1].HTTP2 ||
		!k.StreamListens[0].UDP || k.PortMaps[80] != 8000 {
		t.Fatalf("kong = %+v", k)
	}
}

// busyKong answers the first load with 429 and Retry-After, then takes
// every load, noting when each came.
type busyKong struct {
	fakeKong
	retryAfter time.Duration
	loaded     chan struct{} // one per load
	mu         sync.Mutex
	loads      []time.Time
}

func (k *busyKong) Load(ctx context.Context, doc []byte) error {
	k.mu.Lock()
	k.loads = append(k.loads, time.Now())
	first := len(k.loads) == 1
	k.mu.Unlock()
	select { // later loads, after the test stopped counting, never block
	case k.loaded <- struct{}{}:
	default:
	}
	if first {
		return &admin.LoadError{StatusCode: 429, Message: "Currently loading previous configuration", RetryAfter: k.retryAfter}
	}
	return k.fakeKong.Load(ctx, doc)
}

func (k *busyKong) times() []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.loads)
}

// changingCache has a change waiting at every Wait: a cluster that never
// stops changing.
type changingCache struct{ fakeCache }

func (c *changingCache) Wait(ctx context.Context) error { return ctx.Err() }

// TestRetryAfterHoldsWhileTheClusterChanges: Kong's Retry-After is waited
// for even though changes keep arriving.
func TestRetryAfterHoldsWhileTheClusterChanges(t *testing.T) {
	cache := &changingCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	kong := &busyKong{retryAfter: 300 * time.Millisecond, loaded: make(chan struct{}, 2)}
	l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for range 2 {
		select {
		case <-kong.loaded:
		case <-deadline.C:
			t.Fatal("no second load")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	loads := kong.times()
	if gap := loads[1].Sub(loads[0]); gap < kong.retryAfter {
		t.Fatalf("asked again %v after a 429 with Retry-After %v", gap, kong.retryAfter)
	}
}

// TestStopBeforeCachesSyncIsClean: SIGTERM before the first sync is a
// normal stop, not an error (exit status 0).
func TestStopBeforeCachesSyncIsClean(t *testing.T) {
	l := New(&neverSynced{}, &fakeKong{}, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestSyncedRunsOnceBeforeTheFirstLoad: the Synced hook runs once the
// caches have synced, before the first sync loads Kong.
func TestSyncedRunsOnceBeforeTheFirstLoad(t *testing.T) {
	cache := &fakeCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	kong := &busyKong{loaded: make(chan struct{}, 2)}
	calls, loadsThen := 0, -1
	l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()),
		Options{Synced: func() { calls, loadsThen = calls+1, len(kong.times()) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	select {
	case <-kong.loaded:
	case <-time.After(10 * time.Second):
		t.Fatal("no load")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls != 1 || loadsThen != 0 {
		t.Fatalf("Synced ran %d times, after %d loads; want once, before any", calls, loadsThen)
	}
}

type neverSynced struct{ fakeCache }

func (*neverSynced) WaitForSync(ctx context.Context) bool {
	<-ctx.Done()
	return false
}

// refusingKong refuses, like Kong with flatten_errors, every document that
// holds the service of the HTTPRoute a/bad, and counts the loads.
type refusingKong struct {
	fakeKong
	loads int
}

func (k *refusingKong) Load(ctx context.Context, doc []byte) error {
	k.loads++
	if strings.Contains(string(doc), `"httproute.a.bad.0"`) {
		e := admin.EntityError{Type: "service", Name: "httproute.a.bad.0", Tags: []string{"k8s-name:bad", "k8s-namespace:a", "k8s-kind:HTTPRoute"}}
		e.Errors = append(e.Errors, struct {
			Type    string `json:"type"`
			Field   string `json:"field"`
			Message string `json:"message"`
		}{Type: "field", Field: "host", Message: "refused by test"})
		return &admin.LoadError{StatusCode: 400, Message: "declarative config is invalid", Entities: []admin.EntityError{e}}
	}
	return k.fakeKong.Load(ctx, doc)
}

// TestSyncLeavesOutWhatKongRefusesThenSkipsAnUnchangedLoad: a refused
// object is traced to its route, left out in a second round, and reported
// on the route with Kong's message; the next sync of the same objects
// sends Kong nothing.
func TestSyncLeavesOutWhatKongRefusesThenSkipsAnUnchangedLoad(t *testing.T) {
	cache, kong := &fakeCache{}, &refusingKong{}
	cache.set(t, budgetBase+service("a")+route("a", "bad", 1, 1)+route("a", "good", 1, 1))
	l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 2 || strings.Contains(string(kong.loaded), "httproute.a.bad.") || !strings.Contains(string(kong.loaded), "httproute.a.good.") {
		t.Fatalf("%d loads; loaded %s", kong.loads, kong.loaded)
	}
	if ok, msg := accepted(t, l, "a", "bad"); ok || !strings.Contains(msg, "refused by test") {
		t.Fatalf("bad route: accepted %v, %q", ok, msg)
	}
	if ok, _ := accepted(t, l, "a", "good"); !ok {
		t.Fatal("the good route is not accepted")
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 2 {
		t.Fatalf("an unchanged configuration was sent again (%d loads)", kong.loads)
	}
}

// unnamingKong refuses its first refusals loads naming no object of the
// document, as Kong does for some invalid documents ("declarative config
// is invalid: {}").
type unnamingKong struct {
	fakeKong
	refusals, loads int
}

func (k *unnamingKong) Load(ctx context.Context, doc []byte) error {
	k.loads++
	if k.loads <= k.refusals {
		return &admin.LoadError{StatusCode: 400, Message: "declarative config is invalid: {}"}
	}
	return k.fakeKong.Load(ctx, doc)
}

// TestSyncStartsOverOnceWhenKongNamesNothing: a refusal that names no
// object may come from what the Memo and the Encoder reused, so the sync
// translates and encodes once more from scratch and loads that; a refusal
// that persists costs one more load per sync, not a loop.
func TestSyncStartsOverOnceWhenKongNamesNothing(t *testing.T) {
	cache := &fakeCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	for _, tc := range []struct{ refusals, wantLoads int }{{1, 2}, {100, 2}} {
		kong := &unnamingKong{refusals: tc.refusals}
		l := New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
		_ = l.Sync(context.Background())
		if kong.loads != tc.wantLoads {
			t.Errorf("Kong refusing %d loads: %d loads in one sync, want %d", tc.refusals, kong.loads, tc.wantLoads)
		}
		if loaded := kong.loaded != nil; loaded != (tc.refusals < tc.wantLoads) {
			t.Errorf("Kong refusing %d loads: loaded %v", tc.refusals, loaded)
		}
	}
}

// countingKong counts the loads of a fakeKong.
type countingKong struct {
	fakeKong
	loads int
}

func (k *countingKong) Load(ctx context.Context, doc []byte) error {
	k.loads++
	return k.fakeKong.Load(ctx, doc)
}

// TestSyncHashesWhatItLoadsAndTakesOverWhatKongHolds: the hash taken while
// Kong reads a document is that document's; a restarted konglet that finds
// its configuration in Kong does not load it again, and loads a change.
func TestSyncHashesWhatItLoadsAndTakesOverWhatKongHolds(t *testing.T) {
	ctx := context.Background()
	cache, kong := &fakeCache{}, &countingKong{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	newLoop := func() *Loop {
		return New(cache, kong, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	}
	first := newLoop()
	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 1 || first.held() != declarative.Hash(kong.loaded) {
		t.Fatalf("%d loads; held %q, the loaded document's hash %q", kong.loads, first.held(), declarative.Hash(kong.loaded))
	}
	second := newLoop()
	if !second.checkKong(ctx) || second.held() != first.held() {
		t.Fatalf("the restarted konglet holds %q, Kong %q", second.held(), first.held())
	}
	if err := second.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 1 {
		t.Fatal("the configuration Kong held was loaded again")
	}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1)+route("a", "s", 1, 1))
	if err := second.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 2 || second.held() != declarative.Hash(kong.loaded) || !strings.Contains(string(kong.loaded), "httproute.a.s.") {
		t.Fatalf("%d loads; held %q, the loaded document's hash %q", kong.loads, second.held(), declarative.Hash(kong.loaded))
	}
	if err := second.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if kong.loads != 2 {
		t.Fatal("an unchanged configuration was loaded again")
	}
}
