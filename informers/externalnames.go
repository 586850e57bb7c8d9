package informers

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/konglet/konglet/sync/snapshot"
)

// ExternalNames resolves the names of the ExternalName Services that routes
// use, again every refresh period, and asks for a sync when an answer
// changes. Kong is then given addresses that the translation checked,
// never a name it would resolve on its own: a name may point at Kong's
// admin API on loopback, at cloud metadata, or (through the Pod's DNS
// search path) at another namespace's Service, and may change its answer
// between a check and a connection.
type ExternalNames struct {
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error)
	refresh time.Duration
	timeout time.Duration
	notify  func()
	wake    chan struct{}

	mu      sync.Mutex
	entries map[string]*nameEntry
}

type nameEntry struct {
	res      snapshot.Resolution
	resolved bool
	due      time.Time
}

// NewExternalNames resolves with the system resolver (the Pod's, as Kong's
// would be) and calls notify when an answer changes.
func NewExternalNames(refresh time.Duration, notify func()) *ExternalNames {
	return newExternalNames(net.DefaultResolver.LookupNetIP, refresh, notify)
}

func newExternalNames(lookup func(context.Context, string, string) ([]netip.Addr, error), refresh time.Duration, notify func()) *ExternalNames {
	return &ExternalNames{
		lookup:  func(ctx context.Context, host string) ([]netip.Addr, error) { return lookup(ctx, "ip", host) },
		refresh: refresh,
		timeout: 5 * time.Second,
		notify:  notify,
		wake:    make(chan struct{}, 1),
		entries: map[string]*nameEntry{},
	}
}

// Lookup returns what is known of names (IP literals need no lookup and
// are left out), keeps resolving exactly these names from now on, and
// forgets the others.
func (e *ExternalNames) Lookup(names []string) map[string]snapshot.Resolution {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]snapshot.Resolution, len(names))
	wanted := make(map[string]bool, len(names))
	added := false
	for _, name := range names {
		wanted[name] = true
		entry := e.entries[name]
		if entry == nil {
			e.entries[name] = &nameEntry{}
			added = true
			continue
		}
		if entry.resolved {
			out[name] = entry.res
		}
	}
	for name := range e.entries {
		if !wanted[name] {
			delete(e.entries, name)
		}
	}
	if added {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	return out
}

// Run resolves new names at once and known ones every refresh period
// until ctx ends.
func (e *ExternalNames) Run(ctx context.Context) {
	timer := time.NewTimer(e.refresh)
	defer timer.Stop()
	for {
		next := e.resolveDue(ctx)
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-timer.C:
		}
	}
}

// resolveDue resolves every name that is new or due, notifies when an
// answer changed, and returns when the next one is due.
func (e *ExternalNames) resolveDue(ctx context.Context) time.Time {
	now := time.Now()
	e.mu.Lock()
	var due []string
	for name, entry := range e.entries {
		if !entry.resolved || !now.Before(entry.due) {
			due = append(due, name)
		}
	}
	e.mu.Unlock()
	changed := false
	for _, name := range due {
		res := e.resolve(ctx, name)
		e.mu.Lock()
		if entry := e.entries[name]; entry != nil {
			changed = changed || !entry.resolved || entry.res.Err != res.Err || !slices.Equal(entry.res.Addrs, res.Addrs)
			entry.res, entry.resolved, entry.due = res, true, time.Now().Add(e.refresh)
		}
		e.mu.Unlock()
	}
	if changed {
		e.notify()
	}
	next := time.Now().Add(e.refresh)
	e.mu.Lock()
	for _, entry := range e.entries {
		if entry.resolved && entry.due.Before(next) {
			next = entry.due
		}
	}
	e.mu.Unlock()
	return next
}

func (e *ExternalNames) resolve(ctx context.Context, name string) snapshot.Resolution {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	addrs, err := e.lookup(ctx, name)
	if err != nil {
		return snapshot.Resolution{Err: err.Error()}
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return snapshot.Resolution{Addrs: slices.Compact(addrs)}
}
