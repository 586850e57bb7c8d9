package kongdouble_test

import (
	"strings"
	"testing"
)

// TestCORSLua runs konglet's CORS Lua (a translation's) through the data
// plane with the cases of the Gateway API's conformance test and more.
func TestCORSLua(t *testing.T) {
	cfg, res := translated(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /cors-1}}]
    backendRefs: [{name: app, port: 80}]
    filters:
    - type: CORS
      cors:
        allowOrigins: ["https://www.foo.com", "https://*.bar.com", "http://local.test:8080"]
        allowMethods: [GET, OPTIONS]
        allowHeaders: [x-header-1, x-header-2]
        exposeHeaders: [x-header-3, x-header-4]
        allowCredentials: true
        maxAge: 3600
  - matches: [{path: {value: /cors-2}}]
    backendRefs: [{name: app, port: 80}]
    filters: [{type: CORS, cors: {allowOrigins: ["https://www.foo.com"], allowMethods: ["*"]}}]
  - matches: [{path: {value: /any-cred}}]
    backendRefs: [{name: app, port: 80}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: ["*"], allowHeaders: ["*"], allowCredentials: true}}]
  - matches: [{path: {value: /any}}]
    backendRefs: [{name: app, port: 80}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: ["PUT"], exposeHeaders: ["*"]}}]
  - matches: [{path: {value: /redirect}}]
    filters:
    - {type: CORS, cors: {allowOrigins: ["https://www.foo.com"]}}
    - {type: RequestRedirect, requestRedirect: {hostname: example.com}}
`)
	if msgs := refusals(res); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	s := dataPlane(t, cfg)
	preflight := func(origin, method, headers string) []string {
		h := []string{"Origin", origin, "Access-Control-Request-Method", method}
		if headers != "" {
			h = append(h, "Access-Control-Request-Headers", headers)
		}
		return h
	}
	for _, c := range []struct {
		name, method, path string
		headers            []string
		status             int
		want               map[string]string // "" for absent
		proxied            bool
	}{
		{"preflight, exact origin", "OPTIONS", "/cors-1", preflight("https://www.foo.com", "GET", "x-header-1, x-header-2"), 200, map[string]string{
			"Access-Control-Allow-Origin": "https://www.foo.com", "Access-Control-Allow-Methods": "GET, OPTIONS",
			"Access-Control-Allow-Headers": "x-header-1, x-header-2", "Access-Control-Expose-Headers": "x-header-3, x-header-4",
			"Access-Control-Max-Age": "3600", "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}, false},
		{"preflight, wildcard origin", "OPTIONS", "/cors-1", preflight("https://xpto.www.bar.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": "https://xpto.www.bar.com"}, false},
		{"preflight, case and default port", "OPTIONS", "/cors-1", preflight("HTTPS://WWW.FOO.COM:443", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": "HTTPS://WWW.FOO.COM:443"}, false},
		{"preflight, explicit port", "OPTIONS", "/cors-1", preflight("http://local.test:8080", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": "http://local.test:8080"}, false},
		{"preflight, other port", "OPTIONS", "/cors-1", preflight("http://local.test", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""}, false},
		{"preflight, the wildcard needs a label", "OPTIONS", "/cors-1", preflight("https://bar.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": ""}, false},
		{"preflight, other scheme", "OPTIONS", "/cors-1", preflight("http://www.foo.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": ""}, false},
		{"preflight, suffix without dot", "OPTIONS", "/cors-1", preflight("https://evilbar.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": ""}, false},
		{"preflight, a wildcard in the Origin", "OPTIONS", "/cors-1", preflight("https://*.bar.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": ""}, false},
		{"preflight, hostile Origin", "OPTIONS", "/cors-1", preflight(`https://www.foo.com"]]--`, "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": ""}, false},
		{"simple request, allowed", "GET", "/cors-1", []string{"Origin", "https://www.bar.com"}, 200, map[string]string{
			"Access-Control-Allow-Origin": "https://www.bar.com", "Access-Control-Allow-Credentials": "true",
			"Access-Control-Expose-Headers": "x-header-3, x-header-4", "Vary": "Origin", "Access-Control-Allow-Methods": ""}, true},
		{"simple request, not allowed", "GET", "/cors-1", []string{"Origin", "https://foobar.com"}, 200, map[string]string{
			"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}, true},
		{"no Origin", "GET", "/cors-1", nil, 200, map[string]string{"Access-Control-Allow-Origin": ""}, true},
		{"the upstream gets the client's Host", "GET", "/cors-1", []string{"Origin", "https://www.foo.com"}, 200, map[string]string{
			"X-Upstream-Host": "Example.ORG:80"}, true},
		{"OPTIONS without Access-Control-Request-Method is proxied", "OPTIONS", "/cors-1", []string{"Origin", "https://www.foo.com"}, 200, map[string]string{
			"Access-Control-Allow-Origin": "https://www.foo.com"}, true},
		{"wildcard methods echo the method", "OPTIONS", "/cors-2", preflight("https://www.foo.com", "POST", ""), 200, map[string]string{
			"Access-Control-Allow-Methods": "POST", "Access-Control-Allow-Credentials": "", "Access-Control-Max-Age": "5"}, false},
		{"any origin with credentials echoes", "OPTIONS", "/any-cred", preflight("https://other.foo.com", "PUT", "x-header-1, x-header-2"), 200, map[string]string{
			"Access-Control-Allow-Origin": "https://other.foo.com", "Access-Control-Allow-Methods": "PUT",
			"Access-Control-Allow-Headers": "x-header-1, x-header-2", "Access-Control-Allow-Credentials": "true"}, false},
		{"any origin with credentials, request", "GET", "/any-cred", []string{"Origin", "https://other.foo.com"}, 200, map[string]string{
			"Access-Control-Allow-Origin": "https://other.foo.com", "Access-Control-Allow-Credentials": "true"}, true},
		{"any origin without credentials", "PUT", "/any", []string{"Origin", "https://foobar.com"}, 200, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "*", "Vary": ""}, true},
		{"a preflight before a redirect", "OPTIONS", "/redirect", preflight("https://www.foo.com", "GET", ""), 200, map[string]string{
			"Access-Control-Allow-Origin": "https://www.foo.com", "Location": ""}, false},
		{"a redirect with CORS headers", "GET", "/redirect", []string{"Origin", "https://www.foo.com"}, 302, map[string]string{
			"Access-Control-Allow-Origin": "https://www.foo.com", "Location": "http://example.com/redirect"}, false},
	} {
		host := "example.org"
		if _, ok := c.want["X-Upstream-Host"]; ok {
			host = "Example.ORG:80"
		}
		p := send(t, s, c.method, host, c.path, c.headers...)
		if want, ok := c.want["X-Upstream-Host"]; ok && p.echo.Host != want {
			t.Errorf("%s: upstream Host %q, want %q", c.name, p.echo.Host, want)
		}
		delete(c.want, "X-Upstream-Host")
		if p.status != c.status || (p.header.Get("X-Backend") != "") != c.proxied {
			t.Errorf("%s: %d, proxied %v; want %d, %v", c.name, p.status, p.header.Get("X-Backend") != "", c.status, c.proxied)
		}
		for k, v := range c.want {
			if got := strings.Join(p.header.Values(k), ", "); got != v {
				t.Errorf("%s: %s %q, want %q", c.name, k, got, v)
			}
		}
	}
}

// TestCORSHostile: values that are not origins or tokens are refused on
// the route (they would never reach the Lua as code anyway: luaValues).
func TestCORSHostile(t *testing.T) {
	for _, cors := range []string{
		`{allowOrigins: ["https://a.com\"]]--"]}`, `{allowOrigins: ["https://a.com,https://b.com"]}`, `{allowOrigins: ["https://a.com/path"]}`,
		`{allowOrigins: ["ftp://a.com"]}`, `{allowOrigins: ["*", "https://a.com"]}`, `{allowOrigins: ["https://é.com"]}`,
		`{allowHeaders: ["x-a,x-b"]}`, `{allowHeaders: ["x-a\nx-b"]}`, `{exposeHeaders: ["x a"]}`, `{allowMethods: ["GET,POST"]}`,
		`{allowMethods: ["*", "GET"]}`, `{exposeHeaders: ["*"], allowCredentials: true}`,
	} {
		_, res := translated(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: app, port: 80}], filters: [{type: CORS, cors: `+cors+`}]}]}
`)
		if msgs := refusals(res); len(msgs) == 0 || !strings.Contains(strings.Join(msgs, " "), "CORS") {
			t.Errorf("%s: not refused (%v)", cors, msgs)
		}
	}
}
