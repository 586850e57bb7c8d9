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
	// first is the first change since Wait last started a sync (zero:
	// none): a change that came during a sync has waited since then.
	first time.Time
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
	if t.first.IsZero() {
		t.first = t.last
	}
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

// afterPause tells whether the latest change came after a quiet period,
// and when the first change not synced yet came.
func (t *Trigger) afterPause() (pause bool, first time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.Sub(t.prev) >= t.quiet, t.first
}

// started records that a sync starts: the changes so far are its.
func (t *Trigger) started() {
	t.mu.Lock()
	t.first = time.Time{}
	t.mu.Unlock()
}

// Wait blocks until a sync should start (or ctx ends, returning its error).
// A change that arrives during the sync that follows is kept for the next
// Wait, and counts its wait from its arrival: a sync that took longer
// than maxDelay is followed at once by the next.
func (t *Trigger) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.notify:
	}
	pause, first := t.afterPause()
	if first.IsZero() {
		first = time.Now() // the change came as the last sync started
	}
	deadline := first.Add(t.maxDelay)
	if pause || !time.Now().Before(deadline) {
		t.started()
		return nil
	}
	timer := time.NewTimer(min(t.quiet, time.Until(deadline)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			t.started()
			return nil
		case <-t.notify:
			left := time.Until(deadline)
			if left <= 0 {
				t.started()
				return nil
			}
			timer.Reset(min(t.quiet, left))
		}
	}
}
