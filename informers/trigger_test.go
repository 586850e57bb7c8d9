package informers

import (
	"context"
	"testing"
	"time"
)

func TestTriggerCoalescesABurst(t *testing.T) {
	tr := NewTrigger(5*time.Millisecond, 50*time.Millisecond)
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
	tr := NewTrigger(time.Hour, 20*time.Millisecond)
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
	start := time.Now()
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("Wait did not return within the deadline despite maxDelay: %v", err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("Wait returned after %v, before the burst could be coalesced", waited)
	}
}

func TestTriggerKeepsAChangeDuringSync(t *testing.T) {
	tr := NewTrigger(time.Millisecond, 10*time.Millisecond)
	tr.Notify()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	tr.Notify() // arrives while the caller syncs
	if err := tr.Wait(ctx); err != nil {
		t.Fatalf("a change made during the sync was lost: %v", err)
	}
}
