package informers

import (
	"context"
	"testing"
	"time"
)

// fired returns a trigger that has just started a sync, so that the next
// changes are coalesced rather than started at once.
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
	// With an hour of quiet period, only the idle rule can return.
	tr := NewTrigger(time.Hour, time.Hour)
	tr.Notify()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("a change to an idle trigger waited: %v", err)
	}
	// Right after a sync the trigger is not idle: the next change waits.
	tr.Notify()
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := tr.Wait(short); err == nil {
		t.Fatal("a change right after a sync started another one at once")
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
	if since := time.Since(tr.lastFired); since > time.Second {
		t.Fatalf("lastFired not updated (%v ago)", since)
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
