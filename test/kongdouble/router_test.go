package kongdouble_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

func load(t *testing.T, d *kongdouble.Double, cfg M) {
	t.Helper()
	if r := postConfig(t, d, "?flatten_errors=1", cfg); r.status != http.StatusCreated {
		t.Fatalf("load: %d %s", r.status, r.raw)
	}
}

type routeCase struct {
	name string
	req  kongdouble.Request
	want string // matched route name, "" for no match
}

func checkRoutes(t *testing.T, d *kongdouble.Double, cases []routeCase) {
	t.Helper()
	for _, c := range cases {
		dec, ok := d.Route(c.req)
		got := ""
		if ok {
			got = dec.RouteName
		}
		if got != c.want {
			t.Errorf("%s: matched %q, want %q", c.name, got, c.want)
		}
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestRouteBeforeLoad(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	if _, ok := d.Route(kongdouble.Request{Host: "a", Path: "/"}); ok {
		t.Error("a route matched with no config")
	}
}

func TestExpressionsRouting(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{"services": L{svc("s", "backend",
		route("catch-all", M{"expression": `http.path ^= "/"`, "priority": 1}),
		route("api", M{"expression": `http.path ^= "/api"`, "priority": 10}),
		route("tie-a", M{"id": "aaaaaaaa-0000-4000-8000-000000000000", "expression": `http.path == "/tie"`, "priority": 20}),
		route("tie-b", M{"id": "bbbbbbbb-0000-4000-8000-000000000000", "expression": `http.path == "/tie"`, "priority": 20}),
		route("plain-only", M{"expression": `http.path == "/plain"`, "priority": 20, "protocols": L{"http"}}),
		route("port-80", M{"expression": `net.dst.port == 80 && http.path == "/port"`, "priority": 20}),
		route("port-8080", M{"expression": `net.dst.port == 8080 && http.path == "/port"`, "priority": 20}),
		route("host", M{"expression": `lower(http.host) == "shop.example.com" && http.path ^= "/shop"`, "priority": 20}),
		route("canary", M{"expression": `any(http.headers.x_canary) == "yes" && http.path ^= "/shop"`, "priority": 30}),
		route("query", M{"expression": `http.queries.debug == "" && http.path == "/q"`, "priority": 20}),
		route("sni", M{"expression": `tls.sni == "secure.example.com" && http.path == "/tls"`, "priority": 20}),
		route("quirk", M{"expression": `http.path == "/x" && http.method == "POST" || http.method == "PUT"`, "priority": 20}),
		route("traditional", M{"paths": L{"/legacy"}}),
	)}}))
	checkRoutes(t, d, []routeCase{
		{"highest priority first", kongdouble.Request{Host: "a", Path: "/api/users"}, "api"},
		{"fallback", kongdouble.Request{Host: "a", Path: "/other"}, "catch-all"},
		{"ties go to the larger id", kongdouble.Request{Host: "a", Path: "/tie"}, "tie-b"},
		{"protocol clause (plain)", kongdouble.Request{Host: "a", Path: "/plain"}, "plain-only"},
		{"protocol clause (tls)", kongdouble.Request{TLS: true, Host: "a", Path: "/plain"}, "catch-all"},
		{"port_maps: 8000 is published as 80", kongdouble.Request{ListenPort: 8000, Host: "a", Path: "/port"}, "port-80"},
		{"the Host header port wins", kongdouble.Request{ListenPort: 8000, Host: "a:8080", Path: "/port"}, "port-8080"},
		{"unmapped listen port", kongdouble.Request{ListenPort: 9000, Host: "a", Path: "/port"}, "catch-all"},
		{"default listener", kongdouble.Request{Host: "a", Path: "/port"}, "port-80"},
		{"lower(http.host)", kongdouble.Request{Host: "Shop.Example.COM:80", Path: "/shop/cart"}, "host"},
		{"any() over several header values", kongdouble.Request{Host: "a", Path: "/shop", Headers: hdr("X-Canary", "no", "X-Canary", "yes")}, "canary"},
		{"query key without value", kongdouble.Request{Host: "a", Path: "/q?debug"}, "query"},
		{"query with a value", kongdouble.Request{Host: "a", Path: "/q?debug=1"}, "catch-all"},
		{"sni", kongdouble.Request{TLS: true, SNI: "secure.example.com", Host: "a", Path: "/tls"}, "sni"},
		{"no sni on plain http", kongdouble.Request{SNI: "secure.example.com", Host: "a", Path: "/tls"}, "catch-all"},
		{"|| binds tighter: path && (POST || PUT)", kongdouble.Request{Method: "PUT", Host: "a", Path: "/x"}, "quirk"},
		{"|| binds tighter: PUT elsewhere does not match", kongdouble.Request{Method: "PUT", Host: "a", Path: "/y"}, "catch-all"},
		{"expression routes outrank traditional ones", kongdouble.Request{Host: "a", Path: "/legacy"}, "catch-all"},
		{"normalized path", kongdouble.Request{Host: "a", Path: "/zzz/../api//users"}, "api"},
	})
}

func TestHTTPSOnlyRoutesRedirect(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	load(t, d, oneRoute(route("secure", M{"expression": `http.path == "/s"`, "protocols": L{"https"}, "https_redirect_status_code": 301})))
	dec, ok := d.Route(kongdouble.Request{Host: "a", Path: "/s"})
	if !ok || dec.RedirectStatus != 301 {
		t.Errorf("plain request to an https-only route: %v %+v", ok, dec)
	}
	dec, ok = d.Route(kongdouble.Request{TLS: true, Host: "a", Path: "/s"})
	if !ok || dec.RedirectStatus != 0 {
		t.Errorf("https request: %v %+v", ok, dec)
	}
}

func TestCustomPortMaps(t *testing.T) {
	d := newDouble(t, kongdouble.Options{PortMaps: []string{"8080:8000"}})
	load(t, d, oneRoute(route("r", M{"expression": `net.dst.port == 8080`})))
	if _, ok := d.Route(kongdouble.Request{ListenPort: 8000, Host: "a", Path: "/"}); !ok {
		t.Error("net.dst.port should be the mapped host port 8080")
	}
}

func TestTraditionalCompatibleRouting(t *testing.T) {
	d := newDouble(t, kongdouble.Options{RouterFlavor: "traditional_compatible"})
	load(t, d, config(M{"services": L{svc("s", "backend",
		route("root", M{"paths": L{"/"}}),
		route("foo", M{"paths": L{"/foo"}}),
		route("foobar", M{"paths": L{"/foobar"}}),
		route("regex", M{"paths": L{"~/items/\\d+$"}}),
		route("regex-high", M{"paths": L{"~/items/1"}, "regex_priority": 5}),
		route("host", M{"hosts": L{"shop.example.com"}, "paths": L{"/"}}),
		route("wildcard", M{"hosts": L{"*.example.com"}, "paths": L{"/"}}),
		route("header", M{"headers": M{"X-Env": L{"Prod"}}, "paths": L{"/"}}),
		route("header-regex", M{"headers": M{"X-Version": L{"~*^v[0-9]+$"}}, "paths": L{"/v"}}),
		route("post", M{"methods": L{"POST"}, "paths": L{"/foo"}}),
		route("split", M{"paths": L{"/x", "/longer"}}),
		route("long", M{"paths": L{"/long"}}),
	)}}))
	checkRoutes(t, d, []routeCase{
		{"plain paths are prefixes", kongdouble.Request{Host: "a", Path: "/foobaz"}, "foo"},
		{"the longest prefix wins", kongdouble.Request{Host: "a", Path: "/foobar/1"}, "foobar"},
		{"fallback", kongdouble.Request{Host: "a", Path: "/nothing"}, "root"},
		{"regex beats plain paths", kongdouble.Request{Host: "a", Path: "/items/42"}, "regex"},
		{"regex_priority orders regexes", kongdouble.Request{Host: "a", Path: "/items/12"}, "regex-high"},
		{"regexes are anchored at the start", kongdouble.Request{Host: "a", Path: "/x/items/42"}, "split"},
		{"a plain host adds weight", kongdouble.Request{Host: "shop.example.com", Path: "/foo"}, "host"},
		{"wildcard host", kongdouble.Request{Host: "www.example.com", Path: "/foo"}, "wildcard"},
		{"wildcard needs a label", kongdouble.Request{Host: "example.com", Path: "/foo"}, "foo"},
		{"header values compare lowercased", kongdouble.Request{Host: "a", Path: "/foo", Headers: hdr("x-env", "PROD")}, "header"},
		{"header regex", kongdouble.Request{Host: "a", Path: "/v", Headers: hdr("X-Version", "V2")}, "header-regex"},
		{"method adds weight", kongdouble.Request{Method: "POST", Host: "a", Path: "/foo"}, "post"},
		{"split route, long group", kongdouble.Request{Host: "a", Path: "/longer/1"}, "split"},
		{"split route vs a medium prefix", kongdouble.Request{Host: "a", Path: "/long/1"}, "long"},
		{"split route, short group", kongdouble.Request{Host: "a", Path: "/x/1"}, "split"},
	})
	dec, _ := d.Route(kongdouble.Request{Host: "a", Path: "/longer"})
	if dec.RouteID != routeID("split") {
		t.Errorf("a split route reports the original id, got %s", dec.RouteID)
	}
}

// TestTraditionalRegexPriority13Bits follows transform.lua: regex_priority
// goes through LuaJIT's 32-bit bit.lshift, so 8193 ranks as 1, and a value
// with bit 12 set sign-extends over the field counts.
func TestTraditionalRegexPriority13Bits(t *testing.T) {
	d := newDouble(t, kongdouble.Options{RouterFlavor: "traditional_compatible"})
	load(t, d, config(M{"services": L{svc("s", "backend",
		route("wraps", M{"paths": L{"~/a"}, "regex_priority": 8193}),
		route("two", M{"paths": L{"~/a"}, "regex_priority": 2}),
		route("bit12", M{"paths": L{"~/b"}, "regex_priority": 4096}),
		route("more-fields", M{"paths": L{"~/b"}, "methods": L{"GET"}, "hosts": L{"h"}}),
	)}}))
	checkRoutes(t, d, []routeCase{
		{"only the low 13 bits count", kongdouble.Request{Host: "a", Path: "/a"}, "two"},
		{"bit 12 outranks every field count", kongdouble.Request{Host: "h", Path: "/b"}, "bit12"},
	})
}

// TestPathNormalizationDecodesOthers follows kong/tools/uri.lua: every
// triplet but a reserved character's is decoded, reserved ones upper-cased.
func TestPathNormalizationDecodesOthers(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{"services": L{svc("s", "backend",
		route("space", M{"expression": `http.path == "/docs/a b"`}),
		route("tilde", M{"expression": `http.path == "/~user"`}),
		route("semicolon", M{"expression": `http.path == "/x%3Bcolon"`}),
	)}}))
	checkRoutes(t, d, []routeCase{
		{"space is decoded", kongdouble.Request{Host: "a", Path: "/docs/a%20b"}, "space"},
		{"unreserved is decoded", kongdouble.Request{Host: "a", Path: "/%7euser"}, "tilde"},
		{"reserved stays encoded, upper-cased", kongdouble.Request{Host: "a", Path: "/x%3bcolon"}, "semicolon"},
	})
}

// TestUnderscoreHeaders follows lua-resty-core's header table, which
// fields.lua reads: http.headers.x_env is an X_Env header if the request
// has one (nginx keeps underscores: Kong sets underscores_in_headers), else
// X-Env; the traditional headers field reads the same.
func TestUnderscoreHeaders(t *testing.T) {
	for _, flavor := range []string{"expressions", "traditional_compatible"} {
		d := newDouble(t, kongdouble.Options{RouterFlavor: flavor})
		r := M{"expression": `any(http.headers.x_env) == "prod"`}
		if flavor != "expressions" {
			r = M{"headers": M{"X_Env": L{"prod"}}}
		}
		load(t, d, config(M{"services": L{svc("s", "backend", route("underscore", r))}}))
		checkRoutes(t, d, []routeCase{
			{flavor + ": underscore", kongdouble.Request{Host: "a", Path: "/", Headers: hdr("X_Env", "prod")}, "underscore"},
			{flavor + ": dash", kongdouble.Request{Host: "a", Path: "/", Headers: hdr("X-Env", "prod")}, "underscore"},
			{flavor + ": underscore first", kongdouble.Request{Host: "a", Path: "/", Headers: hdr("X_Env", "dev", "X-Env", "prod")}, ""},
		})
	}
}

func TestDecision(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{
		"services": L{
			M{"name": "to-upstream", "host": "shop-up", "port": 8080, "path": "/base",
				"routes": L{M{"name": "r1", "paths": L{"/shop"}, "strip_path": false, "preserve_host": true,
					"plugins": L{M{"name": "cors"}}}},
				"plugins": L{M{"name": "cors", "config": M{"max_age": 5}}, M{"name": "request-transformer"},
					M{"name": "response-transformer", "enabled": false}}},
			M{"name": "direct", "host": "example.org", "routes": L{M{"name": "r2", "paths": L{"/direct"}}}},
		},
		"upstreams": L{M{"name": "shop-up", "targets": L{
			M{"target": "10.0.0.2:8080", "weight": 10},
			M{"target": "10.0.0.1", "weight": 20},
			M{"target": "10.0.0.3:8080", "weight": 0},
		}}},
		"plugins":   L{M{"name": "prometheus"}},
		"consumers": L{M{"username": "alice", "plugins": L{M{"name": "rate-limiting", "config": M{"minute": 5}}}}},
	}))
	dec, ok := d.Route(kongdouble.Request{Host: "a", Path: "/shop/cart"})
	if !ok {
		t.Fatal("no match")
	}
	want := kongdouble.Decision{
		RouteName: "r1", RouteID: routeID("r1"),
		ServiceName: "to-upstream", ServiceHost: "shop-up", ServicePort: 8080, ServicePath: "/base",
		UpstreamName: "shop-up",
		Targets:      []kongdouble.Target{{Target: "10.0.0.1:8000", Weight: 20}, {Target: "10.0.0.2:8080", Weight: 10}},
		StripPath:    false, PreserveHost: true,
	}
	plugins := dec.Plugins
	dec.Plugins = nil
	if !reflect.DeepEqual(dec, want) {
		t.Errorf("decision\n got %+v\nwant %+v", dec, want)
	}
	var names []string
	for _, p := range plugins {
		names = append(names, p["name"].(string))
	}
	if !reflect.DeepEqual(names, []string{"cors", "request-transformer", "prometheus"}) {
		t.Fatalf("plugins %v", names)
	}
	if lookup(plugins[0], "route", "id") != routeID("r1") || lookup(plugins[0], "config", "methods") == nil {
		t.Errorf("the route-level cors must win and carry its defaults: %v", plugins[0])
	}
	if lookup(plugins[1], "service", "id") != serviceID("to-upstream") {
		t.Errorf("service-level plugin: %v", plugins[1])
	}

	dec, ok = d.Route(kongdouble.Request{Host: "a", Path: "/direct"})
	if !ok || dec.ServiceHost != "example.org" || dec.ServicePort != 80 || dec.UpstreamName != "" || dec.Targets != nil {
		t.Errorf("plain host service: %+v", dec)
	}
	if len(dec.Plugins) != 1 || dec.Plugins[0]["name"] != "prometheus" {
		t.Errorf("global plugins apply everywhere: %v", dec.Plugins)
	}
	if _, ok := d.Route(kongdouble.Request{Host: "a", Path: "/none"}); ok {
		t.Error("matched a path no route has")
	}
}

// TestConcurrentUse exercises loads, reads and routing in parallel (run
// with -race).
func TestConcurrentUse(t *testing.T) {
	d := newDouble(t, kongdouble.Options{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				cfg := oneRoute(route("r", M{"expression": fmt.Sprintf(`http.path == "/%d"`, j)}))
				if r := postConfig(t, d, "", cfg); r.status != http.StatusCreated {
					t.Errorf("load: %d", r.status)
				}
				d.Route(kongdouble.Request{Host: "a", Path: fmt.Sprintf("/%d", j)})
				_ = d.ConfigHash()
				_ = get(t, d, "/status")
			}
		}(i)
	}
	wg.Wait()
	if d.Loads() != 20 || d.Posts() != 20 {
		t.Errorf("loads %d posts %d", d.Loads(), d.Posts())
	}
}
