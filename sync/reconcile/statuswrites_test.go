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

// slowKong loads until the test closes hold (when set before the sync),
// as a Kong with a large configuration takes its time, and tells whether
// a load is in flight.
type slowKong struct {
	fakeKong
	hold   chan struct{}
	mu     sync.Mutex
	inLoad atomic.Bool
	loads  atomic.Int32
}

func (k *slowKong) Load(ctx context.Context, doc []byte) error {
	k.loads.Add(1)
	k.inLoad.Store(true)
	defer k.inLoad.Store(false)
	if k.hold != nil {
		<-k.hold
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fakeKong.Load(ctx, doc)
}

func (k *slowKong) ConfigHash(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fakeKong.ConfigHash(ctx)
}

// timedWriter leads and notes when each write came and ended, and whether
// Kong was loading then; when hold is set (before the first sync), a write
// lasts until the test closes it, as a slow API server's would.
type timedWriter struct {
	kong       *slowKong
	hold       chan struct{}
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
	if w.hold != nil {
		<-w.hold
	}
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

// statusLoop is a loop with a status writer running, waiting the quiet
// period and at most the longest delay given.
func statusLoop(t *testing.T, kong *slowKong, quiet, maxDelay time.Duration) (*Loop, *timedWriter, *fakeCache, context.Context) {
	cache := &fakeCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	w := &timedWriter{kong: kong}
	l := New(cache, kong, w, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	l.statusQuiet, l.statusMaxDelay = quiet, maxDelay
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.writeStatuses(ctx)
	return l, w, cache, ctx
}

// TestStatusWritesWaitOutALongSync: statuses offered just before a sync
// that loads longer than the quiet period are written after it (once: the
// newer ones, offered meanwhile), not while Kong loads.
func TestStatusWritesWaitOutALongSync(t *testing.T) {
	kong := &slowKong{}
	// A quiet period long enough that a loaded machine starts the second
	// sync within it.
	l, w, cache, ctx := statusLoop(t, kong, 200*time.Millisecond, 5*time.Second)
	// The change is decoded before the first sync, so that nothing but
	// scheduling delays the second (under -race, on a loaded machine,
	// decoding it in between once took more than the quiet period).
	changed := snapshotOf(t, budgetBase+service("a")+route("a", "r", 1, 2))
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A change right after: the second sync loads, as long as the test
	// holds it.
	cache.snap = changed
	kong.hold = make(chan struct{})
	synced := make(chan error, 1)
	go func() { synced <- l.Sync(ctx) }()
	if !poll(10*time.Second, kong.inLoad.Load) {
		t.Fatal("the second sync never loaded")
	}
	if poll(4*l.statusQuiet, func() bool { at, _ := w.writes(); return len(at) > 0 }) {
		t.Error("statuses written while Kong loaded")
	}
	close(kong.hold)
	if err := <-synced; err != nil {
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

// TestSyncsPauseAQuietPeriodAfterASyncThatEndsUnseen: a sync that ends
// just as the writer's quiet period does, before its end signal is seen,
// has not been quiet for a period: the writer waits one more after its end
// (it wrote at once, and TestStatusWritesWaitOutALongSync failed now and
// then on a loaded machine).
func TestSyncsPauseAQuietPeriodAfterASyncThatEndsUnseen(t *testing.T) {
	const quiet = 200 * time.Millisecond
	l, _, _, ctx := statusLoop(t, &slowKong{}, quiet, 5*time.Second)
	l.syncing.Store(true)
	ended := make(chan time.Time, 1)
	// The sync ends within the writer's first quiet period, without a
	// signal: as if the period ran out before the signal was sent.
	time.AfterFunc(quiet*3/4, func() {
		l.markSyncEnded()
		l.syncing.Store(false)
		ended <- time.Now()
	})
	if err := l.syncsPause(ctx, l.statusSyncs, quiet, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(<-ended); since < quiet {
		t.Errorf("the syncs paused %v after the last one ended, want at least %v", since, quiet)
	}
}

// TestStatusWritesWaitForSyncsToPauseButNotForever: while syncs follow
// each other, the statuses wait the longest delay, then are written; after
// the last sync, they are written once the quiet period has passed.
func TestStatusWritesWaitForSyncsToPauseButNotForever(t *testing.T) {
	// Long enough that a loaded machine does not pause a loop of syncs
	// for a quiet period.
	l, w, cache, ctx := statusLoop(t, &slowKong{}, 200*time.Millisecond, time.Second)
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
// writer whose write took longer than the longest delay writes the next
// statuses a quiet period after it is done, not the longest delay: they
// waited while it wrote.
func TestStatusWritesKeepUpWhenBehind(t *testing.T) {
	l, w, cache, ctx := statusLoop(t, &slowKong{}, 100*time.Millisecond, 800*time.Millisecond)
	w.hold = make(chan struct{})
	held := true
	deadline := time.Now().Add(10 * time.Second)
	for generation := 1; ; generation++ {
		cache.set(t, budgetBase+service("a")+route("a", "r", generation, 1))
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		at, ended := slices.Clone(w.at), slices.Clone(w.ended)
		w.mu.Unlock()
		// The first write lasts twice the longest delay, syncs going on.
		if held && len(at) == 1 && time.Since(at[0]) >= 2*l.statusMaxDelay {
			close(w.hold)
			held = false
		}
		if len(at) >= 2 {
			if gap := at[1].Sub(ended[0]); gap < l.statusQuiet || gap >= (l.statusQuiet+l.statusMaxDelay)/2 {
				t.Errorf("the next statuses were written %v after a write that took %v: want the quiet period, %v", gap, ended[0].Sub(at[0]), l.statusQuiet)
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
