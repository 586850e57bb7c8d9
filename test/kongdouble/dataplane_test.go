package kongdouble_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/konglet/konglet/test/kongdouble"
)

// echoed is what the test backends answer: the request they received.
type echoed struct {
	Backend string      `json:"backend"`
	Host    string      `json:"host"`
	URI     string      `json:"uri"`
	Headers http.Header `json:"headers"`
}

func echoBackend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", name)
		for _, kv := range r.Header.Values("X-Echo-Set-Header") {
			k, v, _ := strings.Cut(kv, ":")
			w.Header().Add(k, v)
		}
		_ = json.NewEncoder(w).Encode(echoed{Backend: name, Host: r.Host, URI: r.RequestURI, Headers: r.Header})
	}))
	t.Cleanup(s.Close)
	return s
}

// dataPlane loads cfg into a double and serves its proxy listen 8000 with
// targets 198.18.0.1:3000 and 198.18.0.2:3000 resolved to two echo backends.
func dataPlane(t *testing.T, cfg M) *httptest.Server {
	t.Helper()
	d := newDouble(t, kongdouble.Options{})
	load(t, d, cfg)
	a, b := echoBackend(t, "a"), echoBackend(t, "b")
	backends := map[string]string{"198.18.0.1:3000": a.Listener.Addr().String(), "198.18.0.2:3000": b.Listener.Addr().String()}
	dp := kongdouble.NewDataPlane(d, func(target string) (string, bool) {
		addr, ok := backends[target]
		return addr, ok
	})
	t.Cleanup(dp.Close)
	s := httptest.NewServer(dp.Handler(8000, false))
	t.Cleanup(s.Close)
	return s
}

type proxied struct {
	status int
	header http.Header
	body   string
	echo   echoed
}

func send(t *testing.T, s *httptest.Server, method, host, path string, headers ...string) proxied {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	p := proxied{status: res.StatusCode, header: res.Header, body: string(raw)}
	if res.Header.Get("X-Backend") != "" {
		if err := json.Unmarshal(raw, &p.echo); err != nil {
			t.Fatalf("bad echo %q: %v", raw, err)
		}
	}
	return p
}

// upstreamCfg is a service on upstream "up" with the given targets and
// routes.
func upstreamCfg(targets L, routes ...any) M {
	s := svc("s", "up", routes...)
	s["port"] = 3000
	return config(M{
		"services":  L{s},
		"upstreams": L{M{"name": "up", "targets": targets}},
	})
}

func exprRoute(name, expr string, extra M, plugins ...any) M {
	r := M{"name": name, "expression": expr, "priority": 1, "strip_path": false, "preserve_host": true}
	for k, v := range extra {
		r[k] = v
	}
	if len(plugins) > 0 {
		r["plugins"] = L(plugins)
	}
	return r
}

func plugin(name string, cfg M) M { return M{"name": name, "config": cfg} }

var twoTargets = L{M{"target": "198.18.0.1:3000", "weight": 3}, M{"target": "198.18.0.2:3000", "weight": 1}}

func TestDataPlaneNoRouteAndWeights(t *testing.T) {
	s := dataPlane(t, upstreamCfg(twoTargets, exprRoute("r", `http.path ^= "/app"`, nil)))
	if r := send(t, s, "GET", "example.com", "/other"); r.status != 404 || !strings.Contains(r.body, `"no Route matched with those values"`) {
		t.Fatalf("unmatched: %d %s", r.status, r.body)
	}
	counts := map[string]int{}
	for range 8 {
		r := send(t, s, "GET", "example.com", "/app/x?q=1")
		if r.status != 200 {
			t.Fatalf("proxied: %d %s", r.status, r.body)
		}
		counts[r.echo.Backend]++
		if r.echo.URI != "/app/x?q=1" || r.echo.Host != "example.com" {
			t.Fatalf("upstream request %+v", r.echo)
		}
		if r.header.Get("Via") != "1.1 kong/3.9.0" {
			t.Fatalf("Via %q", r.header.Get("Via"))
		}
	}
	if counts["a"] != 6 || counts["b"] != 2 {
		t.Fatalf("weighted round robin 3:1 over 8 requests gave %v", counts)
	}
}

func TestDataPlaneNoTargetsAndUnreachable(t *testing.T) {
	s := dataPlane(t, upstreamCfg(L{}, exprRoute("r", `http.path ^= "/"`, nil)))
	if r := send(t, s, "GET", "a", "/"); r.status != 503 || !strings.Contains(r.body, "failure to get a peer from the ring-balancer") {
		t.Fatalf("no targets: %d %s", r.status, r.body)
	}
	s = dataPlane(t, upstreamCfg(L{M{"target": "198.18.9.9:3000"}}, exprRoute("r", `http.path ^= "/"`, nil)))
	if r := send(t, s, "GET", "a", "/"); r.status != 502 {
		t.Fatalf("unreachable target: %d %s", r.status, r.body)
	}
	// a dead target is retried on the next one
	s = dataPlane(t, upstreamCfg(L{M{"target": "198.18.9.9:3000"}, M{"target": "198.18.0.1:3000"}}, exprRoute("r", `http.path ^= "/"`, nil)))
	for range 4 {
		if r := send(t, s, "GET", "a", "/"); r.status != 200 || r.echo.Backend != "a" {
			t.Fatalf("retry on the next target: %d %s", r.status, r.body)
		}
	}
}

func TestDataPlaneStripPathAndPreserveHost(t *testing.T) {
	s := dataPlane(t, upstreamCfg(L{M{"target": "198.18.0.1:3000"}},
		exprRoute("strip", `http.path ^= "/api"`, M{"strip_path": true, "preserve_host": false})))
	r := send(t, s, "GET", "example.com", "/api/v1?x=y")
	if r.echo.URI != "/v1?x=y" {
		t.Errorf("strip_path: upstream uri %q", r.echo.URI)
	}
	if r.echo.Host != "198.18.0.1:3000" {
		t.Errorf("preserve_host=false: upstream Host %q", r.echo.Host)
	}
	if got := r.echo.Headers.Get("X-Forwarded-Host"); got != "example.com" {
		t.Errorf("X-Forwarded-Host %q", got)
	}
	if r := send(t, s, "GET", "example.com", "/api"); r.echo.URI != "/" {
		t.Errorf("strip_path of the whole path: upstream uri %q", r.echo.URI)
	}
}

func TestDataPlaneRequestTransformer(t *testing.T) {
	rt := plugin("request-transformer", M{
		"remove":  M{"headers": L{"X-Remove"}},
		"replace": M{"headers": L{"X-Set:one", "host:rewritten.example.com"}, "uri": "/new$(uri_captures[1])"},
		"add":     M{"headers": L{"X-Set:one", "X-Absent:added"}},
		"append":  M{"headers": L{"X-Add:two:with:colons"}},
	})
	s := dataPlane(t, upstreamCfg(L{M{"target": "198.18.0.1:3000"}},
		exprRoute("r", `http.path ~ "^/prefix(/.*|)$"`, nil, rt)))
	r := send(t, s, "GET", "example.com", "/prefix/rest?q=1",
		"X-Remove", "gone", "X-Set", "old", "X-Add", "one")
	h := r.echo.Headers
	if h.Get("X-Remove") != "" {
		t.Error("remove: X-Remove still sent")
	}
	if got := h.Values("X-Set"); len(got) != 1 || got[0] != "one" {
		t.Errorf("replace of a present header: %q", got)
	}
	if got := h.Get("X-Absent"); got != "added" {
		t.Errorf("add of an absent header: %q", got)
	}
	if got := strings.Join(h.Values("X-Add"), ","); got != "one,two:with:colons" {
		t.Errorf("append: %q", got)
	}
	if r.echo.Host != "rewritten.example.com" {
		t.Errorf("replace host: %q", r.echo.Host)
	}
	if r.echo.URI != "/new/rest?q=1" {
		t.Errorf("replace.uri with uri_captures: %q", r.echo.URI)
	}
	// without the header, replace does nothing and add sets it
	r = send(t, s, "GET", "example.com", "/prefix")
	if got := r.echo.Headers.Values("X-Set"); len(got) != 1 || got[0] != "one" {
		t.Errorf("add after replace of an absent header: %q", got)
	}
	if r.echo.URI != "/new" {
		t.Errorf("empty capture: %q", r.echo.URI)
	}
}

func TestDataPlaneResponseTransformer(t *testing.T) {
	s := dataPlane(t, upstreamCfg(L{M{"target": "198.18.0.1:3000"}},
		exprRoute("r", `http.path ^= "/"`, nil, plugin("response-transformer", M{
			"remove":  M{"headers": L{"X-Drop"}},
			"replace": M{"headers": L{"X-Set:new", "X-Missing:never"}},
			"add":     M{"headers": L{"X-Set:added", "X-New:added"}},
			"append":  M{"headers": L{"X-Multi:b"}},
		}))))
	r := send(t, s, "GET", "a", "/", "X-Echo-Set-Header", "X-Drop:1", "X-Echo-Set-Header", "X-Set:old", "X-Echo-Set-Header", "X-Multi:a")
	switch {
	case r.header.Get("X-Drop") != "":
		t.Error("remove")
	case strings.Join(r.header.Values("X-Set"), ",") != "new":
		t.Errorf("replace then add: %q", r.header.Values("X-Set"))
	case r.header.Get("X-Missing") != "":
		t.Error("replace of an absent header added it")
	case r.header.Get("X-New") != "added":
		t.Error("add")
	case strings.Join(r.header.Values("X-Multi"), ",") != "a,b":
		t.Errorf("append: %q", r.header.Values("X-Multi"))
	}
}

func TestDataPlaneRedirectAndTermination(t *testing.T) {
	s := dataPlane(t, config(M{"services": L{
		svc("redirects", "no-backend.invalid",
			exprRoute("keep", `http.path ^= "/keep"`, nil, plugin("redirect", M{"status_code": 302, "location": "https://other.example.com:8443", "keep_incoming_path": true})),
			exprRoute("fixed", `http.path == "/fixed"`, nil, plugin("redirect", M{"status_code": 308, "location": "http://example.com/new"})),
			exprRoute("term", `http.path == "/term"`, nil, plugin("request-termination", M{"status_code": 500, "message": "no backend"})),
			exprRoute("term-default", `http.path == "/term-default"`, nil, plugin("request-termination", M{})),
		),
	}}))
	r := send(t, s, "GET", "a", "/keep/x?y=1")
	if r.status != 302 || r.header.Get("Location") != "https://other.example.com:8443/keep/x?y=1" {
		t.Errorf("keep_incoming_path: %d %q", r.status, r.header.Get("Location"))
	}
	r = send(t, s, "GET", "a", "/fixed?z=1")
	if r.status != 308 || r.header.Get("Location") != "http://example.com/new" {
		t.Errorf("fixed location: %d %q", r.status, r.header.Get("Location"))
	}
	r = send(t, s, "GET", "a", "/term")
	if r.status != 500 || strings.TrimSpace(r.body) != `{"message":"no backend"}` {
		t.Errorf("termination: %d %s", r.status, r.body)
	}
	r = send(t, s, "GET", "a", "/term-default")
	if r.status != 503 {
		t.Errorf("termination default: %d %s", r.status, r.body)
	}
}

func TestDataPlaneCORS(t *testing.T) {
	cors := plugin("cors", M{
		"origins": L{"https://app.example.com", `^https://[^/]+\.example\.org$`}, "methods": L{"GET", "POST"},
		"headers": L{"X-Token"}, "exposed_headers": L{"X-Trace"}, "credentials": true, "max_age": 600,
	})
	s := dataPlane(t, upstreamCfg(L{M{"target": "198.18.0.1:3000"}}, exprRoute("r", `http.path ^= "/"`, nil, cors)))
	r := send(t, s, "OPTIONS", "a", "/", "Origin", "https://x.example.org", "Access-Control-Request-Method", "POST")
	want := map[string]string{
		"Access-Control-Allow-Origin": "https://x.example.org", "Access-Control-Allow-Methods": "GET,POST",
		"Access-Control-Allow-Headers": "X-Token", "Access-Control-Allow-Credentials": "true", "Access-Control-Max-Age": "600",
		"Vary": "Origin",
	}
	if r.status != 200 || r.echo.Backend != "" {
		t.Errorf("preflight answered by %q with %d", r.echo.Backend, r.status)
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("preflight %s: %q, want %q", k, got, v)
		}
	}
	r = send(t, s, "GET", "a", "/", "Origin", "https://app.example.com")
	if r.echo.Backend != "a" || r.header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		r.header.Get("Access-Control-Expose-Headers") != "X-Trace" || r.header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("simple request: %v", r.header)
	}
	r = send(t, s, "GET", "a", "/", "Origin", "https://evil.example.com")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("refused origin got %q", r.header.Get("Access-Control-Allow-Origin"))
	}
	// allow_origin_absent defaults to true: without Origin, Kong still
	// runs the header filter (no Access-Control-Allow-Origin, but Vary,
	// credentials and exposed headers)
	r = send(t, s, "GET", "a", "/")
	if r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Vary") != "Origin" || r.header.Get("Access-Control-Expose-Headers") != "X-Trace" {
		t.Errorf("no Origin: %v", r.header)
	}
}

func TestDataPlaneTLS(t *testing.T) {
	certPEM, keyPEM := certPair(t, "secure.example.com")
	wildPEM, wildKey := certPair(t, "wild.example.org")
	anyPEM, anyKey := certPair(t, "any")
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{
		"certificates": L{
			M{"id": "11111111-0000-4000-8000-000000000000", "cert": certPEM, "key": keyPEM, "snis": L{M{"name": "secure.example.com"}}},
			M{"id": "22222222-0000-4000-8000-000000000000", "cert": wildPEM, "key": wildKey, "snis": L{M{"name": "*.example.org"}}},
			M{"id": "33333333-0000-4000-8000-000000000000", "cert": anyPEM, "key": anyKey, "snis": L{M{"name": "*"}}},
		},
		"services": L{svc("s", "no-backend.invalid", exprRoute("r", `http.path ^= "/"`, nil, plugin("request-termination", M{"status_code": 200, "message": "ok"})))},
	}))
	dp := kongdouble.NewDataPlane(d, nil)
	s := httptest.NewUnstartedServer(dp.Handler(8443, true))
	s.TLS = dp.TLSConfig()
	s.StartTLS()
	t.Cleanup(s.Close)
	for sni, cn := range map[string]string{
		"secure.example.com": "secure.example.com", "a.example.org": "wild.example.org", "a.b.example.org": "any", "other.example.com": "any",
	} {
		c := s.Client()
		tr := c.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.InsecureSkipVerify = true
		tr.TLSClientConfig.ServerName = sni
		c.Transport = tr
		req, _ := http.NewRequest("GET", s.URL+"/", nil)
		req.Host = sni
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.TLS.PeerCertificates[0].Subject.CommonName; got != cn {
			t.Errorf("SNI %s: certificate %q, want %q", sni, got, cn)
		}
		if res.StatusCode != 200 {
			t.Errorf("SNI %s: %d", sni, res.StatusCode)
		}
	}
}

// TestDataPlaneCertAlt: of a certificate and its alternative of another
// key type, the client gets the first it supports (OpenSSL with both set).
func TestDataPlaneCertAlt(t *testing.T) {
	ecPEM, ecKey := certPair(t, "ecdsa")
	rsaPEM, rsaKey := rsaCertPair(t, "rsa")
	d := newDouble(t, kongdouble.Options{})
	load(t, d, config(M{
		"certificates": L{M{"id": "11111111-0000-4000-8000-000000000000", "cert": ecPEM, "key": ecKey, "cert_alt": rsaPEM, "key_alt": rsaKey,
			"snis": L{M{"name": "secure.example.com"}}}},
		"services": L{svc("s", "no-backend.invalid", exprRoute("r", `http.path ^= "/"`, nil, plugin("request-termination", M{"status_code": 200, "message": "ok"})))},
	}))
	dp := kongdouble.NewDataPlane(d, nil)
	s := httptest.NewUnstartedServer(dp.Handler(8443, true))
	s.TLS = dp.TLSConfig()
	s.StartTLS()
	t.Cleanup(s.Close)
	base := s.Client().Transport.(*http.Transport)
	for want, suites := range map[string][]uint16{
		"ecdsa": nil,
		"rsa":   {tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256},
	} {
		tr := base.Clone()
		tr.TLSClientConfig.InsecureSkipVerify = true
		tr.TLSClientConfig.ServerName = "secure.example.com"
		if suites != nil {
			tr.TLSClientConfig.MaxVersion, tr.TLSClientConfig.CipherSuites = tls.VersionTLS12, suites
		}
		res, err := (&http.Client{Transport: tr}).Get(s.URL + "/")
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		res.Body.Close()
		if got := res.TLS.PeerCertificates[0].Subject.CommonName; got != want {
			t.Errorf("cipher suites %v: certificate %q, want %q", suites, got, want)
		}
	}
}
