package reconcile

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/status"
	"github.com/konglet/konglet/sync/translate"
)

// peerCache is a fake cache whose peers' Pod changes come from a channel.
type peerCache struct {
	fakeCache
	peers chan struct{}
}

func (c *peerCache) WaitStatus(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.peers:
		return nil
	}
}

// leadingWriter leads and writes nothing: the tests read the offers.
type leadingWriter struct{}

func (leadingWriter) Write(context.Context, *snapshot.Snapshot, translate.Status) (status.Result, error) {
	return status.Result{}, nil
}
func (leadingWriter) Leading() bool { return true }

// TestPeerChangesOfferTheCurrentObjectsOncePerBurst: after its peers' Pods
// changed, the leader offers the last translation's statuses with the
// cache's current objects (those of the translation are older than the
// leader's own writes, and the writer would read each again), and a burst
// of peer changes (every replica loading the same change) is one offer.
func TestPeerChangesOfferTheCurrentObjectsOncePerBurst(t *testing.T) {
	const burst = 20
	cache := &peerCache{peers: make(chan struct{}, burst)}
	objects := budgetBase + service("a") + route("a", "r", 1, 1)
	cache.set(t, objects)
	l := New(cache, &fakeKong{}, leadingWriter{}, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	<-l.statuses // the sync's own offer
	// The cache moves on: the route as the leader's status write left it.
	cache.set(t, objects)
	cache.snap.HTTPRoutes[0].ResourceVersion = "written"
	for range burst {
		cache.peers <- struct{}{}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.watchPeers(ctx)
	}()
	var job statusJob
	select {
	case job = <-l.statuses:
	case <-time.After(10 * time.Second):
		t.Fatal("no statuses offered after the peers changed")
	}
	if rv := job.snap.HTTPRoutes[0].ResourceVersion; rv != "written" {
		t.Errorf("offered the route at version %q, not the cache's current one", rv)
	}
	if _, ok := job.status.Routes[ref("a", "r")]; !ok {
		t.Error("the offer lost the translation's route statuses")
	}
	if left := len(cache.peers); left != 0 {
		t.Errorf("offered with %d of the burst's %d peer changes still to come", left, burst)
	}
	cancel()
	<-done
	select {
	case <-l.statuses:
		t.Error("more than one offer for one burst of peer changes")
	default:
	}
}

// TestSettleWaitsForQuietButNotForever: settle drains changes that keep
// coming within the quiet period, and gives up waiting for quiet at the
// limit.
func TestSettleWaitsForQuietButNotForever(t *testing.T) {
	ctx := context.Background()
	changes := make(chan struct{}, 5)
	for range cap(changes) {
		changes <- struct{}{}
	}
	seen := 0
	wait := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changes:
			seen++
			return nil
		}
	}
	if err := settle(ctx, wait, 10*time.Millisecond, time.Minute); err != nil || seen != cap(changes) {
		t.Fatalf("settle = %v after %d of %d changes", err, seen, cap(changes))
	}
	// Changes that never stop: settle ends at the limit.
	const limit = 50 * time.Millisecond
	start := time.Now()
	never := func(context.Context) error { return nil }
	if err := settle(ctx, never, 10*time.Millisecond, limit); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < limit {
		t.Fatalf("settle returned after %v, before the limit %v", took, limit)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := settle(stopped, wait, time.Second, time.Minute); err == nil {
		t.Fatal("settle on an ended context returned no error")
	}
}
