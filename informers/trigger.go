package informers

import (
	"context"
	"sync"
	"time"
)

// Trigger coalesces bursts of change notifications into syncs. A change
// that follows a pause (no change for the quiet period) starts a sync at
// once, so a lone edit reaches Kong without waiting. Changes closer together
// are a burst: a sync starts once they pause for the quiet period, or at the
// latest maxDelay after the first of them.
type Trigger struct {
	quiet, maxDelay time.Duration
	notify          chan struct{}
	status          chan struct{}

	mu         sync.Mutex
	last, prev time.Time // the two latest changes
}

// NewTrigger returns a trigger with the given quiet period and upper bound.
func NewTrigger(quiet, maxDelay time.Duration) *Trigger {
	if maxDelay <= 0 {
		maxDelay = quiet
	}
	return &Trigger{quiet: min(quiet, maxDelay), maxDelay: maxDelay, notify: make(chan struct{}, 1), status: make(chan struct{}, 1)}
}

// Notify records that something changed. It never blocks.
func (t *Trigger) Notify() {
	t.mu.Lock()
	t.prev, t.last = t.last, time.Now()
	t.mu.Unlock()
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// NotifyStatus records a change that only statuses depend on (a Pod's
// konglet conditions, which the leader reads for Programmed). It wakes
// WaitStatus, not Wait: it is no change to Kong's configuration, and every
// replica's load changes its own Pod, so a sync on each would make N².
func (t *Trigger) NotifyStatus() {
	select {
	case t.status <- struct{}{}:
	default:
	}
}

// WaitStatus blocks until NotifyStatus was called (or ctx ends, returning
// its error). Notifications that arrive meanwhile are one.
func (t *Trigger) WaitStatus(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.status:
		return nil
	}
}

// afterPause tells whether the latest change came after a quiet period.
func (t *Trigger) afterPause() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.Sub(t.prev) >= t.quiet
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
	if t.afterPause() {
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
			return nil
		case <-t.notify:
			left := time.Until(deadline)
			if left <= 0 {
				return nil
			}
			timer.Reset(min(t.quiet, left))
		}
	}
}
