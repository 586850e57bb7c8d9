package reconcile

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// timedPods notes when each Pod report came and what it said.
type timedPods struct {
	mu   sync.Mutex
	at   []time.Time
	sent [][]corev1.PodCondition
}

func (p *timedPods) Report(_ context.Context, _ *corev1.Pod, want []corev1.PodCondition) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at, p.sent = append(p.at, time.Now()), append(p.sent, want)
	return &corev1.Pod{Status: corev1.PodStatus{Conditions: want}}, nil
}

func (p *timedPods) reports() ([]time.Time, [][]corev1.PodCondition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.at), slices.Clone(p.sent)
}

// TestPodReportsWaitForSyncsToPause: the first report goes at once; then,
// while syncs follow each other (each load changes the conditions), the
// reports wait for them to pause, at most the longest delay, instead of
// one PATCH per load; after the last sync, its conditions are reported.
func TestPodReportsWaitForSyncsToPause(t *testing.T) {
	const quiet, longest = 200 * time.Millisecond, time.Second
	cache := &fakeCache{}
	cache.set(t, budgetBase+service("a")+route("a", "r", 1, 1))
	pods := &timedPods{}
	l := New(cache, &fakeKong{}, nil, pods, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), Options{})
	l.statusQuiet, l.statusMaxDelay = quiet, longest
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.reportPod(ctx)
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool { at, _ := pods.reports(); return len(at) == 1 }) {
		t.Fatal("the first conditions were not reported")
	}
	// Syncs one after another, each loading another configuration, for
	// two and a half longest delays.
	start, syncs := time.Now(), 0
	for generation := 2; time.Since(start) < 5*longest/2; generation++ {
		cache.set(t, budgetBase+service("a")+route("a", "r", generation, 1))
		if err := l.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		syncs++
	}
	during, _ := pods.reports()
	if max := 1 + int(time.Since(start)/longest) + 1; len(during) > max || syncs < 10 {
		t.Errorf("%d reports (the first included) during %d syncs over %v: want at most %d", len(during), syncs, time.Since(start), max)
	}
	l.mu.Lock()
	want := l.state.Conditions()
	l.mu.Unlock()
	if !poll(10*time.Second, func() bool {
		_, sent := pods.reports()
		return slices.EqualFunc(sent[len(sent)-1], want, func(a, b corev1.PodCondition) bool { return a.Message == b.Message && a.Status == b.Status })
	}) {
		t.Fatal("the last sync's conditions were never reported")
	}
}
