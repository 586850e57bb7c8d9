package reconcile

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/status"
	"github.com/konglet/konglet/sync/translate"
)

// slowKong takes loadTime over each load, as a Kong with a large
// configuration does, and tells whether a load is in flight.
type slowKong struct {
	fakeKong
	loadTime time.Duration
	mu       sync.Mutex
	inLoad   atomic.Bool
	loads    atomic.Int32
}

func (k *slowKong) Load(ctx context.Context, doc []byte) error {
	k.loads.Add(1)
	k.inLoad.Store(true)
	defer k.inLoad.Store(false)
	time.Sleep(k.loadTime) // Kong's own work, not a wait for the test
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fakeKong.Load(ctx, doc)
}

func (k *slowKong) ConfigHash(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fakeKong.ConfigHash(ctx)
}

// timedWriter leads and notes when each write came and whether Kong was
// loading then.
type timedWriter struct {
	kong       *slowKong
	writeTime  time.Duration // how long each write takes, as the API server would
	mu         sync.Mutex
	at, ended  []time.Time
	duringLoad int
}

func (w *timedWriter) Write(context.Context, *snapshot.Snapshot, translate.Status) (status.Result, error) {
	w.mu.Lock()
	w.at = append(w.at, time.Now())
	if w.kong.inLoad.Load() {
		w.duringLoad++
	}
	w.mu.Unlock()
	time.Sleep(w.writeTime) // the API server's time, not a wait for the test
	w.mu.Lock()
	w.ended = append(w.ended, time.Now())
	w.mu.Unlock()
	return status.Result{}, nil
}
func (w *timedWriter) Leading() bool { return true }

func (w *timedWriter) writes() (at []time.Time, duringLoad int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.at...), w.duringLoad
}

func statusLoop(t *testing.T, kong *slowKong) (*Loop, *timedWriter, *fakeCache, context.Context) {
	cache := &fakeCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	w := &timedWriter{kong: kong}
	l := New(cache, kong, w, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.writeStatuses(ctx)
	return l, w, cache, ctx
}

// TestStatusWritesWaitOutALongSync: statuses offered just before a sync
// that loads longer than the quiet period are written after it (once: the
// newer ones, offered meanwhile), not while Kong loads.
func TestStatusWritesWaitOutALongSync(t *testing.T) {
	kong := &slowKong{loadTime: 4 * statusQuiet}
	l, w, cache, ctx := statusLoop(t, kong)
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A change right after: the second sync loads too.
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 2))
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	secondEnded := time.Now()
	if kong.loads.Load() != 2 {
		t.Fatalf("%d loads, want 2", kong.loads.Load())
	}
	if !poll(10*time.Second, func() bool { at, _ := w.writes(); return len(at) > 0 }) {
		t.Fatal("no status write after the syncs ended")
	}
	at, during := w.writes()
	if during > 0 || at[0].Before(secondEnded) {
		t.Errorf("statuses written while the second sync ran (%d while Kong loaded)", during)
	}
	if len(at) != 1 {
		t.Errorf("%d writes, want one: the first sync's statuses are older than the second's", len(at))
	}
}

// TestStatusWritesWaitForSyncsToPauseButNotForever: while syncs follow
// each other, the statuses wait the longest delay, then are written; after
// the last sync, they are written once the quiet period has passed.
func TestStatusWritesWaitForSyncsToPauseButNotForever(t *testing.T) {
	kong := &slowKong{}
	l, w, cache, ctx := statusLoop(t, kong)
	// Long enough that a loaded machine does not pause a loop of syncs
	// for a quiet period.
	l.statusQuiet, l.statusMaxDelay = 200*time.Millisecond, time.Second
	var firstOffer time.Time
	for generation := 1; ; generation++ {
		cache.set(t, budgetBase+service("a")+route("a", "r", generation, 1))
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if firstOffer.IsZero() {
			firstOffer = time.Now()
		}
		if at, _ := w.writes(); len(at) > 0 {
			if waited := at[0].Sub(firstOffer); waited < l.statusMaxDelay-l.statusQuiet || waited > l.statusMaxDelay+2*time.Second {
				t.Errorf("statuses written %v after they were offered, while syncs went on: want about %v", waited, l.statusMaxDelay)
			}
			break
		}
		if time.Since(firstOffer) > 10*time.Second {
			t.Fatal("no status write within 10s while syncs went on")
		}
	}
	written, _ := w.writes()
	lastSync := time.Now()
	cache.set(t, budgetBase+service("a")+route("a", "r", 1000, 1))
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { at, _ := w.writes(); return len(at) > len(written) }) {
		t.Fatal("no status write after the last sync")
	}
	at, _ := w.writes()
	if waited := at[len(written)].Sub(lastSync); waited < l.statusQuiet || waited >= l.statusMaxDelay {
		t.Errorf("statuses written %v after the last sync: want the quiet period, %v", waited, l.statusQuiet)
	}
}

// TestStatusWritesKeepUpWhenBehind: while syncs follow each other, a
// writer whose writes take longer than the longest delay writes the next
// statuses a quiet period after it is done, not the longest delay: they
// waited while it wrote.
func TestStatusWritesKeepUpWhenBehind(t *testing.T) {
	kong := &slowKong{}
	l, w, cache, ctx := statusLoop(t, kong)
	l.statusQuiet, l.statusMaxDelay = 100*time.Millisecond, 800*time.Millisecond
	w.writeTime = 2 * l.statusMaxDelay
	deadline := time.Now().Add(10 * time.Second)
	for generation := 1; ; generation++ {
		cache.set(t, budgetBase+service("a")+route("a", "r", generation, 1))
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		at, ended := slices.Clone(w.at), slices.Clone(w.ended)
		w.mu.Unlock()
		if len(at) >= 2 {
			if gap := at[1].Sub(ended[0]); gap < l.statusQuiet || gap >= (l.statusQuiet+l.statusMaxDelay)/2 {
				t.Errorf("the next statuses were written %v after a write that took %v: want the quiet period, %v", gap, w.writeTime, l.statusQuiet)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than two status writes within 10s while syncs went on")
		}
	}
}

// poll tells whether cond held within limit, looking every millisecond.
func poll(limit time.Duration, cond func() bool) bool {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
