package informers

import (
	"context"
	"testing"
	"time"
)

// fired returns a trigger that has just started a sync for a change, so
// that the next changes are a burst, coalesced rather than started at once.
func fired(t *testing.T, quiet, maxDelay time.Duration) *Trigger {
	t.Helper()
	tr := NewTrigger(quiet, maxDelay)
	tr.Notify()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTriggerStartsALoneChangeAtOnce(t *testing.T) {
	// With an hour of quiet period, only the pause rule can return.
	tr := NewTrigger(time.Hour, time.Hour)
	tr.Notify()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("a change after a pause waited: %v", err)
	}
	// A change right after that one is a burst: it waits.
	tr.Notify()
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := tr.Wait(short); err == nil {
		t.Fatal("a change right after another started a sync at once")
	}
}

func TestTriggerCoalescesABurst(t *testing.T) {
	tr := fired(t, 5*time.Millisecond, time.Hour)
	for range 100 {
		tr.Notify()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The burst was one sync: nothing is pending now.
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := tr.Wait(short); err == nil {
		t.Fatal("a second Wait returned without any new change")
	}
}

func TestTriggerHonoursTheUpperBound(t *testing.T) {
	// Changes keep coming faster than the quiet period: Wait must still
	// return, bounded by maxDelay, not by the end of the stream.
	const maxDelay = 200 * time.Millisecond
	tr := fired(t, time.Hour, maxDelay)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				tr.Notify()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("Wait did not return within the deadline despite maxDelay: %v", err)
	}
}

// TestTriggerCountsTheDelayFromTheFirstChange: a change that came while
// the last sync ran has waited since it came; its sync starts at most
// maxDelay after it, not maxDelay after the sync ended.
func TestTriggerCountsTheDelayFromTheFirstChange(t *testing.T) {
	const maxDelay = 300 * time.Millisecond
	tr := fired(t, time.Hour, maxDelay)
	tr.Notify() // during the sync, right after the one before it
	tr.Notify()
	// The sync took the whole max delay.
	tr.mu.Lock()
	tr.first = tr.first.Add(-maxDelay)
	tr.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), maxDelay/2)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("changes that waited the max delay during a sync waited again: %v", err)
	}
	// That sync took them all: the next change waits afresh.
	tr.Notify()
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := tr.Wait(short); err == nil {
		t.Fatal("a change right after a sync started its own at once")
	}
	// A sync shorter than the bound: the changes during it wait the rest.
	tr = fired(t, time.Hour, maxDelay)
	notified := time.Now()
	tr.Notify()
	tr.Notify()
	const took = 2 * maxDelay / 3
	tr.mu.Lock()
	tr.first = tr.first.Add(-took)
	tr.mu.Unlock()
	rest, cancelRest := context.WithTimeout(context.Background(), 2*(maxDelay-took))
	defer cancelRest()
	if err := tr.Wait(rest); err != nil {
		t.Fatalf("changes during a sync waited more than the rest of the bound: %v", err)
	}
	if waited := time.Since(notified); waited < maxDelay-took {
		t.Fatalf("changes during a sync waited %v, less than the rest of the bound (%v)", waited, maxDelay-took)
	}
}

func TestTriggerKeepsAChangeDuringSync(t *testing.T) {
	tr := fired(t, time.Millisecond, 10*time.Millisecond)
	tr.Notify() // arrives while the caller syncs
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("a change made during the sync was lost: %v", err)
	}
}

func TestTriggerTellsAPauseFromABurst(t *testing.T) {
	tr := NewTrigger(20*time.Millisecond, 80*time.Millisecond)
	now := time.Now()
	for _, c := range []struct {
		gap   time.Duration
		pause bool
	}{{time.Hour, true}, {20 * time.Millisecond, true}, {19 * time.Millisecond, false}, {0, false}} {
		tr.prev, tr.last = now.Add(-c.gap), now
		if got, _ := tr.afterPause(); got != c.pause {
			t.Errorf("a change %v after the previous one: afterPause %v, want %v", c.gap, got, c.pause)
		}
	}
}

// TestTriggerStatusChangesWakeOnlyTheStatusPath: a Pod's conditions
// change what the leader writes, not Kong's configuration: no sync (each
// replica's load changes its own Pod; a sync on every replica for each
// would make N²), and no change the next one could be a burst with.
func TestTriggerStatusChangesWakeOnlyTheStatusPath(t *testing.T) {
	tr := NewTrigger(time.Hour, time.Hour)
	tr.NotifyStatus()
	tr.NotifyStatus() // coalesced with the first
	if len(tr.notify) != 0 || !tr.last.IsZero() {
		t.Fatal("a status change asked for a sync")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.WaitStatus(ctx); err != nil {
		t.Fatalf("a status change did not wake the status path: %v", err)
	}
	if len(tr.status) != 0 {
		t.Fatal("two status changes were not coalesced")
	}
}
