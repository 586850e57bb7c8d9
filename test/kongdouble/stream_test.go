package kongdouble_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// streamOptions: two plain tcp listens (9000 published as 5000), an ssl
// one and a udp one.
func streamOptions(flavor string) kongdouble.Options {
	return kongdouble.Options{
		RouterFlavor: flavor,
		StreamListeners: []kongdouble.Listener{
			{IP: "0.0.0.0", Port: 9000},
			{IP: "0.0.0.0", Port: 9001},
			{IP: "0.0.0.0", Port: 9443, SSL: true},
			{IP: "0.0.0.0", Port: 9999, UDP: true},
		},
		PortMaps: []string{"80:8000", "443:8443", "5000:9000"},
	}
}

func streamSvc(name string, routes ...any) M {
	s := svc(name, name+"-up", routes...)
	s["protocol"], s["port"] = "tcp", 7000
	return s
}

type streamCase struct {
	name string
	req  kongdouble.StreamRequest
	want string // matched route name, "" when Kong closes the connection
}

func checkStream(t *testing.T, d *kongdouble.Double, cases []streamCase) {
	t.Helper()
	for _, c := range cases {
		dec, ok := d.RouteStream(c.req)
		got := ""
		if ok {
			got = dec.RouteName
		}
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: matched %q (%v), want %q", c.name, got, ok, c.want)
		}
	}
}

func dst(port int) L { return L{M{"port": port}} }

// The same routes written for each flavor.
var streamConfigs = map[string]M{
	"expressions": config(M{"services": L{
		streamSvc("tcp-a",
			route("tcp-9000", M{"protocols": L{"tcp"}, "expression": `net.dst.port == 5000`}),
			route("tcp-9001", M{"protocols": L{"tcp"}, "expression": `net.dst.port == 9001`})),
		streamSvc("tls-a",
			route("tls-term", M{"protocols": L{"tls"}, "expression": `tls.sni == "term.example.com" && net.dst.port == 9443`}),
			route("tls-pass", M{"protocols": L{"tls_passthrough"}, "expression": `tls.sni == "pass.example.com"`}),
			route("tls-pass-wild", M{"protocols": L{"tls_passthrough"}, "expression": `tls.sni =^ ".wild.example.com"`})),
		streamSvc("udp-a",
			route("udp-9999", M{"protocols": L{"udp"}, "expression": `net.dst.port == 9999`})),
	}}),
	"traditional_compatible": config(M{"services": L{
		streamSvc("tcp-a",
			route("tcp-9000", M{"protocols": L{"tcp"}, "destinations": dst(5000)}),
			route("tcp-9001", M{"protocols": L{"tcp"}, "destinations": dst(9001)})),
		streamSvc("tls-a",
			route("tls-term", M{"protocols": L{"tls"}, "snis": L{"term.example.com"}, "destinations": dst(9443)}),
			route("tls-pass", M{"protocols": L{"tls_passthrough"}, "snis": L{"pass.example.com"}, "destinations": dst(9443)}),
			route("tls-pass-wild", M{"protocols": L{"tls_passthrough"}, "snis": L{"*.wild.example.com"}, "destinations": dst(9443)})),
		streamSvc("udp-a",
			route("udp-9999", M{"protocols": L{"udp"}, "destinations": dst(9999)})),
	}}),
}

func TestStreamRouting(t *testing.T) {
	tlsReq := func(port int, sni string) kongdouble.StreamRequest {
		return kongdouble.StreamRequest{ListenPort: port, TLS: true, SNI: sni}
	}
	cases := []streamCase{
		{"tcp: port_maps publishes 9000 as 5000", kongdouble.StreamRequest{ListenPort: 9000}, "tcp-9000"},
		{"tcp: net.dst.port isolates listens", kongdouble.StreamRequest{ListenPort: 9001}, "tcp-9001"},
		{"tls terminate", tlsReq(9443, "term.example.com"), "tls-term"},
		{"tls passthrough, exact sni", tlsReq(9443, "pass.example.com"), "tls-pass"},
		{"tls passthrough, wildcard sni", tlsReq(9443, "a.wild.example.com"), "tls-pass-wild"},
		{"a wildcard does not match its apex", tlsReq(9443, "wild.example.com"), ""},
		{"unknown sni: closed", tlsReq(9443, "other.example.com"), ""},
		{"TLS without SNI: closed", tlsReq(9443, ""), ""},
		{"no ssl_preread on a non-ssl listen: TLS is plain tcp", tlsReq(9000, "pass.example.com"), "tcp-9000"},
		{"udp", kongdouble.StreamRequest{ListenPort: 9999, UDP: true}, "udp-9999"},
		{"udp datagram on a tcp listen", kongdouble.StreamRequest{ListenPort: 9000, UDP: true}, ""},
		{"tcp connection on a udp listen", kongdouble.StreamRequest{ListenPort: 9999}, ""},
		{"a proxy (http) listen is not a stream listen", kongdouble.StreamRequest{ListenPort: 8000}, ""},
		{"no such listen", kongdouble.StreamRequest{ListenPort: 1234}, ""},
	}
	// The compat flavor's snis clause lets plain tcp through (see
	// TestStreamKongQuirks), so this one only holds with expressions.
	only := map[string][]streamCase{"expressions": {
		{"plain tcp on an ssl listen: closed", kongdouble.StreamRequest{ListenPort: 9443}, ""},
	}}
	for _, flavor := range []string{"expressions", "traditional_compatible"} {
		t.Run(flavor, func(t *testing.T) {
			d := newDouble(t, streamOptions(flavor))
			if _, ok := d.RouteStream(kongdouble.StreamRequest{ListenPort: 9000}); ok {
				t.Error("a stream route matched with no config")
			}
			load(t, d, streamConfigs[flavor])
			checkStream(t, d, append(cases, only[flavor]...))
		})
	}
}

func TestStreamDecision(t *testing.T) {
	d := newDouble(t, streamOptions("traditional_compatible"))
	s := streamSvc("db", route("db", M{"protocols": L{"tcp"}, "destinations": dst(5000)}))
	load(t, d, config(M{
		"services": L{s},
		"upstreams": L{M{"name": "db-up", "targets": L{
			M{"target": "10.0.0.2:5432", "weight": 50}, M{"target": "10.0.0.1"}, M{"target": "10.0.0.3:5432", "weight": 0},
		}}},
		"plugins": L{
			M{"name": "tcp-log", "protocols": L{"tcp", "tls"}, "config": M{"host": "logs", "port": 9}},
			M{"name": "udp-log", "config": M{"host": "logs", "port": 9}}, // default protocols: http ones
			M{"name": "cors"},
		},
	}))
	dec, ok := d.RouteStream(kongdouble.StreamRequest{ListenPort: 9000})
	if !ok {
		t.Fatal("no match")
	}
	want := kongdouble.Decision{
		RouteName: "db", RouteID: routeID("db"), ServiceName: "db", ServiceHost: "db-up", ServicePort: 7000,
		UpstreamName: "db-up", Targets: []kongdouble.Target{{Target: "10.0.0.1:8000", Weight: 100}, {Target: "10.0.0.2:5432", Weight: 50}},
		StripPath: true,
	}
	plugins := dec.Plugins
	dec.Plugins = nil
	if !reflect.DeepEqual(dec, want) {
		t.Errorf("decision\n got %+v\nwant %+v", dec, want)
	}
	if len(plugins) != 1 || plugins[0]["name"] != "tcp-log" {
		t.Errorf("plugins = %v, want only tcp-log", plugins)
	}
}

func TestStreamSourcesAndPriority(t *testing.T) {
	d := newDouble(t, streamOptions("traditional_compatible"))
	load(t, d, config(M{"services": L{streamSvc("s",
		route("port", M{"protocols": L{"tcp"}, "destinations": dst(5000)}),
		route("cidr", M{"protocols": L{"tcp"}, "sources": L{M{"ip": "10.0.0.0/8"}}}),
		route("ip-and-port", M{"protocols": L{"tcp"}, "sources": L{M{"ip": "10.1.2.3"}}, "destinations": dst(5000)}),
	)}}))
	checkStream(t, d, []streamCase{
		{"sources + destinations outrank destinations", kongdouble.StreamRequest{ListenPort: 9000, SrcIP: "10.1.2.3"}, "ip-and-port"},
		{"source bits outrank destination bits", kongdouble.StreamRequest{ListenPort: 9000, SrcIP: "10.9.9.9"}, "cidr"},
		{"destination port", kongdouble.StreamRequest{ListenPort: 9000, SrcIP: "192.0.2.1"}, "port"},
		{"source cidr", kongdouble.StreamRequest{ListenPort: 9001, SrcIP: "10.9.9.9"}, "cidr"},
		{"nothing", kongdouble.StreamRequest{ListenPort: 9001, SrcIP: "192.0.2.1"}, ""},
	})
}

// Behaviours read from Kong 3.9's source that are easy to get wrong.
func TestStreamKongQuirks(t *testing.T) {
	t.Run("ssl listen behind port_maps: the second layer sees the unmapped port", func(t *testing.T) {
		opts := streamOptions("expressions")
		opts.PortMaps = append(opts.PortMaps, "5443:9443")
		d := newDouble(t, opts)
		load(t, d, config(M{"services": L{streamSvc("s",
			route("mapped", M{"protocols": L{"tls"}, "expression": `tls.sni == "a.example.com" && net.dst.port == 5443`}),
			route("unmapped", M{"protocols": L{"tls"}, "expression": `tls.sni == "b.example.com" && net.dst.port == 9443`}),
			route("either", M{"protocols": L{"tls"}, "expression": `tls.sni == "c.example.com" && (net.dst.port == 5443 || net.dst.port == 9443)`}),
		)}}))
		checkStream(t, d, []streamCase{
			{"mapped port: first layer only", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "a.example.com"}, ""},
			{"listen port: second layer only", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "b.example.com"}, ""},
			{"both", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "c.example.com"}, "either"},
		})
	})
	t.Run("without a tls.sni field every connection is tcp", func(t *testing.T) {
		d := newDouble(t, streamOptions("expressions"))
		load(t, d, config(M{"services": L{streamSvc("s",
			route("tcp-only", M{"protocols": L{"tcp"}, "expression": `net.dst.port == 5000`}),
		)}}))
		// net.protocol is "tls" only when the router reads the SNI.
		checkStream(t, d, []streamCase{
			{"TLS client routed as tcp", kongdouble.StreamRequest{ListenPort: 9000, TLS: true, SNI: "x.example.com"}, "tcp-only"},
		})
	})
	t.Run("expressions: a tls route gets no protocol clause", func(t *testing.T) {
		d := newDouble(t, streamOptions("expressions"))
		load(t, d, config(M{"services": L{streamSvc("s",
			route("tls-by-port", M{"protocols": L{"tls"}, "expression": `net.dst.port == 5000 || net.dst.port == 9999`}),
			route("tcp-or-tls", M{"protocols": L{"tcp", "tls"}, "expression": `net.dst.port == 9001 || net.dst.port == 9999`, "priority": 1}),
		)}}))
		checkStream(t, d, []streamCase{
			{"plain tcp matches a tls-only route", kongdouble.StreamRequest{ListenPort: 9000}, "tls-by-port"},
			{"and so does udp", kongdouble.StreamRequest{ListenPort: 9999, UDP: true}, "tls-by-port"},
			{"tcp in a tcp+tls route", kongdouble.StreamRequest{ListenPort: 9001}, "tcp-or-tls"},
		})
	})
	t.Run("traditional_compatible: no protocol clause, snis only bind tls", func(t *testing.T) {
		d := newDouble(t, streamOptions("traditional_compatible"))
		load(t, d, config(M{"services": L{streamSvc("s",
			route("by-sni", M{"protocols": L{"tls_passthrough"}, "snis": L{"a.example.com"}}),
			route("tcp-9999", M{"protocols": L{"tcp"}, "destinations": dst(9999)}),
		)}}))
		checkStream(t, d, []streamCase{
			{"sni matches", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "a.example.com"}, "by-sni"},
			{"other sni", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "b.example.com"}, ""},
			// (net.protocol != "tls" || tls.sni == ...) holds for non-TLS traffic,
			// and the snis route outranks the destinations one.
			{"plain tcp takes the snis route", kongdouble.StreamRequest{ListenPort: 9001}, "by-sni"},
			{"so does udp", kongdouble.StreamRequest{ListenPort: 9999, UDP: true}, "by-sni"},
			{"plain tcp on the ssl listen is passed through", kongdouble.StreamRequest{ListenPort: 9443}, "by-sni"},
		})
	})
	t.Run("a tls route on an ssl listen needs a TLS client", func(t *testing.T) {
		d := newDouble(t, streamOptions("expressions"))
		load(t, d, config(M{"services": L{streamSvc("s",
			route("tls-any", M{"protocols": L{"tls"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 10}),
			route("tcp-any", M{"protocols": L{"tcp"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 5}),
		)}}))
		checkStream(t, d, []streamCase{
			{"TLS client", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "x.example.com"}, "tls-any"},
			{"plain client: the terminator's handshake fails", kongdouble.StreamRequest{ListenPort: 9443}, ""},
			{"plain client on a non-ssl listen", kongdouble.StreamRequest{ListenPort: 9000}, "tls-any"},
		})
	})
	t.Run("a tcp route first matched on an ssl listen closes the connection", func(t *testing.T) {
		d := newDouble(t, streamOptions("expressions"))
		load(t, d, config(M{"services": L{streamSvc("s",
			route("tcp-any", M{"protocols": L{"tcp"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 10}),
			route("tls-any", M{"protocols": L{"tls"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 5}),
		)}}))
		checkStream(t, d, []streamCase{
			{"unexpected protocols in matched Route", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "x.example.com"}, ""},
			{"tcp listen", kongdouble.StreamRequest{ListenPort: 9000}, "tcp-any"},
		})
	})
}

func TestStreamServices(t *testing.T) {
	d := newDouble(t, streamOptions("traditional_compatible"))
	disabled := streamSvc("off", route("to-disabled", M{"protocols": L{"tcp"}, "destinations": dst(5000)}))
	disabled["enabled"] = false
	httpSvc := svc("web", "web-up", route("to-http-service", M{"protocols": L{"tcp"}, "destinations": dst(9001)}))
	load(t, d, config(M{"services": L{disabled, httpSvc}}))
	if dec, ok := d.RouteStream(kongdouble.StreamRequest{ListenPort: 9000}); ok {
		t.Errorf("a route of a disabled service matched: %+v", dec)
	}
	dec, ok := d.RouteStream(kongdouble.StreamRequest{ListenPort: 9001})
	if !ok || dec.RouteName != "to-http-service" || dec.ServiceName != "" || dec.ServiceHost != "" {
		t.Errorf("a stream route keeps no http service: %+v %v", dec, ok)
	}
}

func TestHTTPAndStreamRoutersAreSeparate(t *testing.T) {
	t.Run("expressions", func(t *testing.T) {
		d := newDouble(t, streamOptions("expressions"))
		// Neither route gets a protocol clause (single https / single tls), so
		// in one shared router each would match the other subsystem's traffic.
		load(t, d, config(M{"services": L{
			svc("web", "web-up", route("https-any", M{"protocols": L{"https"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 100})),
			streamSvc("s", route("tls-any", M{"protocols": L{"tls"}, "expression": `net.src.ip == 127.0.0.1`, "priority": 200})),
		}}))
		checkRoutes(t, d, []routeCase{
			{"https request", kongdouble.Request{TLS: true, SNI: "a", Host: "a", Path: "/"}, "https-any"},
		})
		checkStream(t, d, []streamCase{
			{"tcp connection", kongdouble.StreamRequest{ListenPort: 9000}, "tls-any"},
			{"tls connection", kongdouble.StreamRequest{ListenPort: 9443, TLS: true, SNI: "a"}, "tls-any"},
		})
	})
	t.Run("traditional_compatible", func(t *testing.T) {
		d := newDouble(t, streamOptions("traditional_compatible"))
		load(t, d, config(M{"services": L{
			svc("web", "web-up", route("web", M{"hosts": L{"only.example.com"}})),
			streamSvc("s", route("from-localhost", M{"protocols": L{"tcp"}, "sources": L{M{"ip": "127.0.0.1"}}})),
		}}))
		checkRoutes(t, d, []routeCase{
			{"http host", kongdouble.Request{Host: "only.example.com", Path: "/"}, "web"},
			{"no stream route for http", kongdouble.Request{Host: "other.example.com", Path: "/"}, ""},
		})
		checkStream(t, d, []streamCase{
			{"stream", kongdouble.StreamRequest{ListenPort: 9000}, "from-localhost"},
		})
	})
}

func TestStreamListenersInInfo(t *testing.T) {
	d := newDouble(t, streamOptions(""))
	r := get(t, d, "/")
	if r.status != http.StatusOK {
		t.Fatalf("GET / = %d", r.status)
	}
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"configuration", "stream_listen", 0}, "0.0.0.0:9000 reuseport backlog=16384"},
		{[]any{"configuration", "stream_listen", 2}, "0.0.0.0:9443 ssl reuseport backlog=16384"},
		{[]any{"configuration", "stream_listen", 3}, "0.0.0.0:9999 udp reuseport"},
		{[]any{"configuration", "stream_listeners", 0, "port"}, 9000.0},
		{[]any{"configuration", "stream_listeners", 0, "udp"}, false},
		{[]any{"configuration", "stream_listeners", 2, "ssl"}, true},
		{[]any{"configuration", "stream_listeners", 2, "listener"}, "0.0.0.0:9443 ssl reuseport backlog=16384"},
		{[]any{"configuration", "stream_listeners", 3, "udp"}, true},
		{[]any{"configuration", "stream_listeners", 3, "listener"}, "0.0.0.0:9999 udp reuseport"},
		{[]any{"configuration", "stream_listeners", 3, "backlog=%d+"}, false},
		{[]any{"configuration", "stream_listeners", 3, "http2"}, nil},
		{[]any{"configuration", "proxy_listeners", 1, "listener"}, "0.0.0.0:8443 ssl http2 reuseport backlog=16384"},
		{[]any{"configuration", "proxy_listeners", 1, "udp"}, nil},
	}
	for _, c := range checks {
		if got := lookup(r.body, c.path...); got != c.want {
			t.Errorf("GET / %v = %#v, want %#v", c.path, got, c.want)
		}
	}
}

func TestListenersKongRefuses(t *testing.T) {
	for name, opts := range map[string]kongdouble.Options{
		"udp ssl stream listen": {StreamListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 9000, UDP: true, SSL: true}}},
		"http2 stream listen":   {StreamListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 9000, HTTP2: true}}},
		"udp proxy listen":      {ProxyListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 8000, UDP: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New accepted a listen Kong refuses")
				}
			}()
			kongdouble.New(opts).Close()
		})
	}
}
