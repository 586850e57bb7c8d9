package reconcile

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/konglet/konglet/proxy/admin"
)

func TestBackoffIsCappedJitteredAndHonoursRetryAfter(t *testing.T) {
	l := New(nil, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()),
		Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	var last time.Duration
	for i := range 12 {
		d := l.backoff(errors.New("kong down"))
		want := min(100*time.Millisecond<<i, time.Second)
		if d < want/2 || d > want {
			t.Fatalf("failure %d: backoff %v, want within [%v, %v]", i+1, d, want/2, want)
		}
		last = d
	}
	if last > time.Second {
		t.Fatalf("backoff %v above the cap", last)
	}
	if d := l.backoff(&admin.LoadError{StatusCode: 429, RetryAfter: 3 * time.Second}); d != 3*time.Second {
		t.Fatalf("Retry-After 3s gave %v", d)
	}
}

func TestKongFromInfo(t *testing.T) {
	k := KongFromInfo(admin.Info{Version: "3.9.0", RouterFlavor: "expressions", PortMaps: map[int]int{80: 8000},
		ProxyListeners:  []admin.Listen{{Port: 8000}, {Port: 8443, SSL: true, HTTP2: true}},
		StreamListeners: []admin.Listen{{Port: 9053, UDP: true}},
		EnabledPlugins:  map[string]bool{"cors": true}})
	if !k.PluginEnabled("cors") || k.PluginEnabled("redirect") || len(k.ProxyListens) != 2 || !k.ProxyListens[1].HTTP2 ||
		!k.StreamListens[0].UDP || k.PortMaps[80] != 8000 {
		t.Fatalf("kong = %+v", k)
	}
}
