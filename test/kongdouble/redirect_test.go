package kongdouble_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// translated is the Kong configuration konglet makes of in (a
// GatewayClass, a Gateway gw with an HTTP listener on port 80 and the
// Service app, whose endpoint is the data plane's backend a, are added), with Kong's defaults: expressions, Lua allowed.
func translated(t *testing.T, in string) (M, translate.Result) {
	t.Helper()
	var objs snapshot.Objects
	base := `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: konglet}
spec: {controllerName: konglet.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec: {gatewayClassName: konglet, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{name: http, port: 80, targetPort: 3000}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: ns, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: 3000}]
endpoints: [{addresses: [198.18.0.1], conditions: {ready: true}}]
---
`
	if err := objs.Decode(strings.NewReader(base+in), "in"); err != nil {
		t.Fatal(err)
	}
	snap := objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions))
	res := translate.Translate(snap, nil)
	raw, err := declarative.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg M
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, res
}

// hostile is what a route author may write in a redirect path: quotes,
// backslashes, Lua's long-string brackets and comments, newlines, a NUL,
// non-ASCII, template and format characters, and length.
var hostile = []string{
	`/"]]..os.exit()--[[`, `/\"\\\n`, "/a\nb\r\nLocation: https://evil.example", "/\x00x", "/é/日本/🎉",
	"/%s%d%%/$(uri_captures[1])/%41%4/%%41/%2541%", "/%", "/]]=]==]" + strings.Repeat("]", 50), "/" + strings.Repeat("x", 8000), // gopher-lua's gsub is quadratic, LuaJIT's is not
}

func TestRedirectLua(t *testing.T) {
	route := `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /keep}}]
    filters: [{type: RequestRedirect, requestRedirect: {}}]
  - matches: [{path: {type: PathPrefix, value: /https}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
  - matches: [{path: {type: PathPrefix, value: /https-443}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, port: 443, statusCode: 303}}]
  - matches: [{path: {type: PathPrefix, value: /port-8080}}]
    filters: [{type: RequestRedirect, requestRedirect: {port: 8080, statusCode: 307}}]
  - matches: [{path: {type: PathPrefix, value: /port-80}}]
    filters: [{type: RequestRedirect, requestRedirect: {port: 80, statusCode: 308}}]
  - matches: [{path: {type: PathPrefix, value: /http-8443}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: http, port: 8443}}]
  - matches: [{path: {type: PathPrefix, value: /prefix/}}, {path: {type: PathPrefix, value: /other}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.com, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new/}}}]
  - matches: [{path: {type: PathPrefix, value: /to-root}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
  - matches: [{path: {type: PathPrefix, value: /full}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /replaced}}}]
`
	cfg, res := translated(t, route)
	if msgs := refusals(res); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	s := dataPlane(t, cfg)
	for _, c := range []struct {
		host, path string
		status     int
		location   string
	}{
		{"example.org", "/keep/a?x=1&y", 302, "http://example.org/keep/a?x=1&y"},
		{"Example.ORG.:80", "/keep", 302, "http://example.org/keep"},
		{"example.org:1234", "/keep", 302, "http://example.org/keep"},
		{"example.org", "/https/a", 301, "https://example.org/https/a"},
		{"example.org", "/https-443", 303, "https://example.org/https-443"},
		{"example.org", "/port-8080/x", 307, "http://example.org:8080/port-8080/x"},
		{"example.org", "/port-80", 308, "http://example.org/port-80"},
		{"example.org", "/http-8443", 302, "http://example.org:8443/http-8443"},
		{"example.org", "/prefix/lemon?q", 302, "http://example.com/new/lemon?q"},
		{"example.org", "/prefix", 302, "http://example.com/new"},
		{"example.org", "/other/a/b", 302, "http://example.com/new/a/b"},
		{"example.org", "/to-root/lemon", 302, "http://example.org/lemon"},
		{"example.org", "/to-root", 302, "http://example.org/"},
		{"example.org", "/full/a/b?q=1", 302, "http://example.org/replaced?q=1"},
		// What the client sends is escaped, never interpreted.
		{"example.org", `/keep/"<x>'é?a="b"`, 302, `http://example.org/keep/%22%3Cx%3E%27%C3%A9?a=%22b%22`},
		{"example.org", "/prefix/%0d%0aX:%20y/../z", 302, "http://example.com/new/z"},
	} {
		p := send(t, s, http.MethodGet, c.host, c.path)
		if p.status != c.status || p.header.Get("Location") != c.location {
			t.Errorf("%s %s: %d %q, want %d %q", c.host, c.path, p.status, p.header.Get("Location"), c.status, c.location)
		}
	}
}

// refusals are the messages of the routes' conditions that are False.
func refusals(res translate.Result) []string {
	var out []string
	for _, parents := range res.Status.Routes {
		for _, p := range parents {
			for _, c := range p.Conditions {
				if c.Status == "False" && c.Type != string(gwv1.RouteConditionPartiallyInvalid) {
					out = append(out, c.Type+": "+c.Message)
				}
			}
		}
	}
	return out
}

// locationEscaped is the Location path the redirect Lua must write for
// path: every byte outside RFC 3986's path and query characters
// percent-encoded, and "%" where it starts no escape.
func locationEscaped(path string) string {
	isHex := func(i int) bool { return i < len(path) && strings.IndexByte("0123456789abcdefABCDEF", path[i]) >= 0 }
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0 ||
			c == '%' && isHex(i+1) && isHex(i+2) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestRedirectLuaHostile: hostile paths in both path modifiers come out of
// the Lua byte for byte, escaped, and never change the code that carries
// them; a hostile hostname or scheme is refused on the route.
func TestRedirectLuaHostile(t *testing.T) {
	var rules []any
	for i, h := range hostile {
		rules = append(rules,
			M{"matches": L{M{"path": M{"type": "PathPrefix", "value": fmt.Sprintf("/full%d", i)}}},
				"filters": L{M{"type": "RequestRedirect", "requestRedirect": M{"path": M{"type": "ReplaceFullPath", "replaceFullPath": h}}}}},
			M{"matches": L{M{"path": M{"type": "PathPrefix", "value": fmt.Sprintf("/prefix%d", i)}}},
				"filters": L{M{"type": "RequestRedirect", "requestRedirect": M{"hostname": "example.com", "path": M{"type": "ReplacePrefixMatch", "replacePrefixMatch": h}}}}})
	}
	route, err := json.Marshal(M{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": M{"name": "r", "namespace": "ns"}, "spec": M{"parentRefs": L{M{"name": "gw"}}, "rules": rules}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, res := translated(t, string(route))
	if msgs := refusals(res); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	s := dataPlane(t, cfg)
	for i, h := range hostile {
		p := send(t, s, http.MethodGet, "example.org", fmt.Sprintf("/full%d/x?q=%%22", i))
		if want := "http://example.org" + locationEscaped(h) + "?q=%22"; p.status != 302 || p.header.Get("Location") != want {
			t.Errorf("full %.30q: %d %.80q, want %.80q", h, p.status, p.header.Get("Location"), want)
		}
		p = send(t, s, http.MethodGet, "example.org", fmt.Sprintf("/prefix%d/rest", i))
		if want := "http://example.com" + locationEscaped(strings.TrimSuffix(h, "/")+"/rest"); p.status != 302 || p.header.Get("Location") != want {
			t.Errorf("prefix %.30q: %d %.80q, want %.80q", h, p.status, p.header.Get("Location"), want)
		}
	}

	for _, filter := range []string{
		`{hostname: "evil.com/x"}`, `{hostname: "a\"b"}`, `{hostname: "Example.com"}`, `{scheme: javascript}`,
		`{port: 0}`, `{port: 70000}`, `{statusCode: 200}`, `{path: {type: ReplaceFullPath, replaceFullPath: "x"}}`,
		`{path: {type: ReplaceFullPath}}`, `{path: {type: Other, replaceFullPath: "/x"}}`,
	} {
		_, res := translated(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{filters: [{type: RequestRedirect, requestRedirect: `+filter+`}]}]}
`)
		if msgs := refusals(res); len(msgs) == 0 || !strings.Contains(strings.Join(msgs, " "), "RequestRedirect") {
			t.Errorf("%s: not refused (%v)", filter, msgs)
		}
	}
	_, res = translated(t, `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: ns}
spec: {parentRefs: [{name: gw}], rules: [{matches: [{path: {type: Exact, value: /x}}], filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /y}}}]}]}
`)
	if msgs := refusals(res); len(msgs) == 0 {
		t.Errorf("ReplacePrefixMatch on an Exact match: not refused")
	}
}
