package informers

import (
	"context"
	"time"
)

// Trigger coalesces bursts of change notifications into syncs. A change
// that finds the trigger idle (no sync started within maxDelay) starts one
// at once, so a lone edit reaches Kong without waiting. Otherwise a sync
// starts once no change arrived for the quiet period, or at the latest
// maxDelay after the first change of the burst.
type Trigger struct {
	quiet, maxDelay time.Duration
	notify          chan struct{}
	lastFired       time.Time // only Wait's goroutine touches it
}

// NewTrigger returns a trigger with the given quiet period and upper bound.
func NewTrigger(quiet, maxDelay time.Duration) *Trigger {
	if maxDelay <= 0 {
		maxDelay = quiet
	}
	return &Trigger{quiet: min(quiet, maxDelay), maxDelay: maxDelay, notify: make(chan struct{}, 1)}
}

// Notify records that something changed. It never blocks.
func (t *Trigger) Notify() {
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// Wait blocks until a sync should start (or ctx ends, returning its error).
// A change that arrives during the sync that follows is kept for the next
// Wait.
func (t *Trigger) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.notify:
	}
	if time.Since(t.lastFired) >= t.maxDelay {
		t.lastFired = time.Now()
		return nil
	}
	deadline := time.Now().Add(t.maxDelay)
	timer := time.NewTimer(t.quiet)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			t.lastFired = time.Now()
			return nil
		case <-t.notify:
			left := time.Until(deadline)
			if left <= 0 {
				t.lastFired = time.Now()
				return nil
			}
			timer.Reset(min(t.quiet, left))
		}
	}
}
