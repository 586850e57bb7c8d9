package informers

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDNS answers from a table that the test changes.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   map[string]int
	events  chan struct{} // a lookup or a sync request happened
}

// happened wakes a poll: something it waits for may have changed.
func (f *fakeDNS) happened() {
	select {
	case f.events <- struct{}{}:
	default:
	}
}

func (f *fakeDNS) lookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	defer f.happened()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[host]++
	a, ok := f.answers[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return slices.Clone(a), nil
}

func (f *fakeDNS) set(host string, ips ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var a []netip.Addr
	for _, ip := range ips {
		a = append(a, netip.MustParseAddr(ip))
	}
	f.answers[host] = a
}

// poll checks ok again at every lookup or sync request, until it holds or
// the deadline passes (the resolver looks up every refresh period, so
// events keep coming while it runs).
func (f *fakeDNS) poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for !ok() {
		select {
		case <-f.events:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestExternalNames: a new name is resolved at once and a sync asked for;
// it is resolved again each refresh, a changed answer asks for a sync; a
// name no longer used is no longer asked; failures are reported as such.
func TestExternalNames(t *testing.T) {
	dns := &fakeDNS{answers: map[string][]netip.Addr{}, asked: map[string]int{}, events: make(chan struct{}, 1)}
	dns.set("a.example.net", "192.0.2.2", "::ffff:192.0.2.1", "192.0.2.2")
	var syncs atomic.Int32
	names := newExternalNames(dns.lookup, 20*time.Millisecond, func() { syncs.Add(1); dns.happened() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go names.Run(ctx)

	if got := names.Lookup([]string{"a.example.net", "missing.example.net"}); len(got) != 0 {
		t.Fatalf("nothing is known before the first resolution, got %v", got)
	}
	dns.poll(t, "both names resolved and a sync asked for", func() bool {
		got := names.Lookup([]string{"a.example.net", "missing.example.net"})
		return len(got) == 2 && syncs.Load() > 0
	})
	got := names.Lookup([]string{"a.example.net", "missing.example.net"})
	if want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}; !slices.Equal(got["a.example.net"].Addrs, want) {
		t.Fatalf("a.example.net: %+v, want sorted distinct unmapped %v", got["a.example.net"], want)
	}
	if got["missing.example.net"].Err == "" {
		t.Fatalf("a failed lookup must say so: %+v", got["missing.example.net"])
	}

	before := syncs.Load()
	dns.set("a.example.net", "192.0.2.3")
	dns.poll(t, "the changed answer taken and a sync asked for", func() bool {
		a := names.Lookup([]string{"a.example.net"})["a.example.net"].Addrs
		return len(a) == 1 && a[0] == netip.MustParseAddr("192.0.2.3") && syncs.Load() > before
	})

	// missing.example.net was left out of the last Lookups: after a
	// resolution that may have been under way, it is asked no more.
	count := func(host string) int {
		dns.mu.Lock()
		defer dns.mu.Unlock()
		return dns.asked[host]
	}
	base := count("a.example.net")
	dns.poll(t, "two more rounds", func() bool { return count("a.example.net") >= base+2 })
	asked := count("missing.example.net")
	dns.poll(t, "three more rounds", func() bool { return count("a.example.net") >= base+5 })
	if n := count("missing.example.net"); n != asked {
		t.Fatalf("a name no longer used was resolved again (%d times, was %d)", n, asked)
	}
}
