package kongdouble_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// hostNormalizer is the global pre-function plugin konglet emits, taken
// from a translation so that these tests run the code konglet sends.
func hostNormalizer(t *testing.T) M {
	t.Helper()
	_, res := translated(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: app, port: 80}]}]}
`)
	cfg := res.Config
	if len(cfg.Plugins) != 1 || cfg.Plugins[0].Name != "pre-function" {
		t.Fatalf("no host normalizer in %+v", cfg.Plugins)
	}
	raw, err := json.Marshal(cfg.Plugins[0])
	if err != nil {
		t.Fatal(err)
	}
	var p M
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// twoListeners is a Kong with listens 8000 (Service port 80) and 8001
// (Service port 8080): an admin route only on 8080, a public one on 80,
// written the way each router flavor isolates them by port.
func twoListeners(t *testing.T, flavor string, plugins ...M) *kongdouble.Double {
	t.Helper()
	d := newDouble(t, kongdouble.Options{
		RouterFlavor:   flavor,
		ProxyListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 8000}, {IP: "0.0.0.0", Port: 8001}},
		PortMaps:       []string{"80:8000", "8080:8001"},
	})
	admin := M{"name": "admin", "protocols": []string{"http"}, "expression": `(net.dst.port == 8080) && (lower(http.host) == "admin.example.com")`}
	public := M{"name": "public", "protocols": []string{"http"}, "expression": `(net.dst.port == 80) && (http.path ^= "/")`}
	if flavor != "expressions" {
		admin = M{"name": "admin", "protocols": []string{"http"}, "hosts": []string{"admin.example.com:8080"}}
		public = M{"name": "public", "protocols": []string{"http"}, "hosts": []string{"admin.example.com:80", "www.example.com:80"}}
	}
	cfg := config(M{"services": []any{svc("s", "198.18.0.1", admin, public)}})
	if len(plugins) > 0 {
		cfg["plugins"] = plugins
	}
	load(t, d, cfg)
	return d
}

// TestLyingHostPort: Kong's router takes net.dst.port from a port in the
// Host header, so a client on port 80 reaches the routes of the 8080
// listener by naming 8080, on both router flavors; konglet's Host
// normalizer makes the router use the port the connection reached, and
// routes a trailing-dot name as the name.
func TestLyingHostPort(t *testing.T) {
	normalizer := hostNormalizer(t)
	for _, flavor := range []string{"expressions", "traditional_compatible"} {
		t.Run(flavor, func(t *testing.T) {
			req := func(listen int, host string) kongdouble.Request {
				return kongdouble.Request{ListenPort: listen, Host: host, Path: "/"}
			}
			checkRoutes(t, twoListeners(t, flavor), []routeCase{
				{"the attack: port 80 naming 8080", req(8000, "admin.example.com:8080"), "admin"},
				{"the attack in hexadecimal", req(8000, "admin.example.com:0x1F90"), "admin"},
				{"port 8080 naming 80", req(8001, "admin.example.com:80"), "public"},
				{"a trailing dot is kept", req(8001, "admin.example.com."), ""},
			})
			checkRoutes(t, twoListeners(t, flavor, normalizer), []routeCase{
				{"port 80 naming 8080 stays on 80", req(8000, "admin.example.com:8080"), "public"},
				{"in hexadecimal too", req(8000, "admin.example.com:0x1F90"), "public"},
				{"port 8080 naming 80 stays on 8080", req(8001, "admin.example.com:80"), "admin"},
				{"the admin listener", req(8001, "admin.example.com"), "admin"},
				{"a trailing dot is the name", req(8001, "admin.example.com."), "admin"},
				{"letter case does not matter", req(8001, "Admin.Example.COM:80"), "admin"},
			})
		})
	}
}

// TestHostNormalizerHostile: whatever the Host, the normalizer never fails
// in Lua and never lets a request on port 80 reach the 8080 listener.
func TestHostNormalizerHostile(t *testing.T) {
	normalizer := hostNormalizer(t)
	for _, flavor := range []string{"expressions", "traditional_compatible"} {
		d := twoListeners(t, flavor, normalizer)
		for _, host := range []string{
			"[::1]:8080", "[::1]", "[admin.example.com:8080", "admin.example.com]:8080", "[::1]x:8080",
			"admin.example.com:8080:8080", "admin.example.com::8080", ":8080", "", ".", "..", "...:8080",
			"admin.example.com..", "admin.example.com.:8080", "admin.example.com..:8080",
			"admin.example.com:+8080", "admin.example.com: 8080 ", "admin.example.com:8080.9", "admin.example.com:8.08e3",
			"admin.example.com:-8080", "admin.example.com:", "admin.example.com:%38080",
			strings.Repeat("a", 100000) + ":8080", strings.Repeat(".", 10000), "admin.example.com" + strings.Repeat(":", 5000) + "8080",
			"admin.example.com\x00:8080", "admin.example.com/:8080", "ADMIN.example.com:8080",
		} {
			dec, ok := d.Route(kongdouble.Request{ListenPort: 8000, Host: host, Path: "/"})
			if ok && dec.RouteName == "admin" {
				t.Errorf("%s: Host %.40q on port 80 reached the 8080 listener's route", flavor, host)
			}
		}
	}
}

// TestHostNormalizerUpstreamHost: the upstream gets the Host the client
// sent (the route preserves it), not the one the router saw.
func TestHostNormalizerUpstreamHost(t *testing.T) {
	route := M{"name": "r", "protocols": []string{"http"}, "expression": `lower(http.host) == "admin.example.com"`, "preserve_host": true}
	cfg := config(M{
		"services": []any{svc("s", "198.18.0.1", route)},
		"plugins":  []any{hostNormalizer(t)},
	})
	cfg["services"].([]any)[0].(M)["port"] = 3000
	s := dataPlane(t, cfg)
	for _, host := range []string{"admin.example.com:8080", "admin.example.com.", "Admin.Example.com"} {
		p := send(t, s, http.MethodGet, host, "/")
		if p.status != http.StatusOK || p.echo.Host != host {
			t.Errorf("Host %q: %d, upstream Host %q, want the client's", host, p.status, p.echo.Host)
		}
		// Kong's X-Forwarded-Host is nginx's $host, its port the one the
		// connection reached (8000 is Service port 80), with or without
		// the plugin.
		if h, port := p.echo.Headers.Get("X-Forwarded-Host"), p.echo.Headers.Get("X-Forwarded-Port"); h != "admin.example.com" || port != "80" {
			t.Errorf("Host %q: X-Forwarded-Host %q, X-Forwarded-Port %q", host, h, port)
		}
	}
}
