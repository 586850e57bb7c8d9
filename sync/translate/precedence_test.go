package translate_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// precedenceBase is a Gateway with one HTTP listener and one backend.
const precedenceBase = classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 80}]}
`

// route writes an HTTPRoute named name in ns with the given rules YAML.
func route(ns, name, created, hostnames, rules string) string {
	ts := ""
	if created != "" {
		ts = ", creationTimestamp: " + created
	}
	return fmt.Sprintf(`---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: %s, namespace: %s%s}
spec:
  parentRefs: [{name: gw, namespace: ns}]
  hostnames: %s
  rules:
%s
`, name, ns, ts, hostnames, rules)
}

const backend = "    backendRefs: [{name: app, namespace: ns, port: 80}]\n"

// TestPrecedence loads the translation into the strict Kong double and asks
// its expressions router which rule serves each request: every tie-break of
// the HTTPRoute specification must hold.
func TestPrecedence(t *testing.T) {
	grant := `---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: all, namespace: ns}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: other}]
  to: [{group: "", kind: Service}]
`
	cases := []struct {
		name   string
		routes string
		req    kongdouble.Request
		want   string // ns/route/rule/match
	}{
		{"exact path beats a longer prefix",
			route("ns", "prefix", "", "[]", "  - matches: [{path: {type: PathPrefix, value: /aaaa}}]\n"+backend) +
				route("ns", "exact", "", "[]", "  - matches: [{path: {type: Exact, value: /aaaa}}]\n"+backend),
			kongdouble.Request{Path: "/aaaa"}, "ns/exact/0/0"},
		{"longest prefix wins",
			route("ns", "short", "", "[]", "  - matches: [{path: {value: /a}}]\n"+backend) +
				route("ns", "long", "", "[]", "  - matches: [{path: {value: /a/b}}]\n"+backend),
			kongdouble.Request{Path: "/a/b/c"}, "ns/long/0/0"},
		{"prefix matches whole segments only",
			route("ns", "short", "", "[]", "  - matches: [{path: {value: /a}}]\n"+backend) +
				route("ns", "long", "", "[]", "  - matches: [{path: {value: /a/b}}]\n"+backend),
			kongdouble.Request{Path: "/a/bc"}, "ns/short/0/0"},
		{"method match beats none",
			route("ns", "any", "", "[]", "  - matches: [{path: {value: /m}}]\n"+backend) +
				route("ns", "get", "", "[]", "  - matches: [{path: {value: /m}, method: GET}]\n"+backend),
			kongdouble.Request{Path: "/m", Method: "GET"}, "ns/get/0/0"},
		{"a longer prefix outranks a method",
			route("ns", "method", "", "[]", "  - matches: [{path: {value: /a}, method: GET}]\n"+backend) +
				route("ns", "longer", "", "[]", "  - matches: [{path: {value: /a/b}}]\n"+backend),
			kongdouble.Request{Path: "/a/b", Method: "GET"}, "ns/longer/0/0"},
		{"headers outrank query parameters",
			route("ns", "queries", "", "[]", "  - matches: [{path: {value: /x}, queryParams: [{name: a, value: '1'}, {name: b, value: '2'}]}]\n"+backend) +
				route("ns", "header", "", "[]", "  - matches: [{path: {value: /x}, headers: [{name: a, value: '1'}]}]\n"+backend),
			kongdouble.Request{Path: "/x?a=1&b=2", Headers: http.Header{"A": {"1"}}}, "ns/header/0/0"},
		{"most header matches win",
			route("ns", "one", "", "[]", "  - matches: [{path: {value: /h}, headers: [{name: a, value: '1'}]}]\n"+backend) +
				route("ns", "two", "", "[]", "  - matches: [{path: {value: /h}, headers: [{name: a, value: '1'}, {name: b, value: '2'}]}]\n"+backend),
			kongdouble.Request{Path: "/h", Headers: http.Header{"A": {"1"}, "B": {"2"}}}, "ns/two/0/0"},
		{"most query matches win",
			route("ns", "one", "", "[]", "  - matches: [{path: {value: /q}, queryParams: [{name: a, value: '1'}]}]\n"+backend) +
				route("ns", "two", "", "[]", "  - matches: [{path: {value: /q}, queryParams: [{name: a, value: '1'}, {name: b, value: '2'}]}]\n"+backend),
			kongdouble.Request{Path: "/q?a=1&b=2"}, "ns/two/0/0"},
		{"method outranks headers",
			route("ns", "headers", "", "[]", "  - matches: [{path: {value: /x}, headers: [{name: a, value: '1'}, {name: b, value: '2'}]}]\n"+backend) +
				route("ns", "method", "", "[]", "  - matches: [{path: {value: /x}, method: POST}]\n"+backend),
			kongdouble.Request{Path: "/x", Method: "POST", Headers: http.Header{"A": {"1"}, "B": {"2"}}}, "ns/method/0/0"},
		{"oldest route wins a tie",
			route("ns", "aaa-new", "2026-02-01T00:00:00Z", "[]", "  - matches: [{path: {value: /t}}]\n"+backend) +
				route("ns", "zzz-old", "2026-01-01T00:00:00Z", "[]", "  - matches: [{path: {value: /t}}]\n"+backend),
			kongdouble.Request{Path: "/t"}, "ns/zzz-old/0/0"},
		{"then namespace/name order",
			route("other", "a", "2026-01-01T00:00:00Z", "[]", "  - matches: [{path: {value: /t}}]\n"+backend) +
				route("ns", "b", "2026-01-01T00:00:00Z", "[]", "  - matches: [{path: {value: /t}}]\n"+backend) + grant,
			kongdouble.Request{Path: "/t"}, "ns/b/0/0"},
		{"then the first rule of a route",
			route("ns", "r", "", "[]", "  - matches: [{path: {value: /t}}]\n"+backend+"  - matches: [{path: {value: /t}}]\n"+backend),
			kongdouble.Request{Path: "/t"}, "ns/r/0/0"},
		{"then the first match of a rule",
			route("ns", "r", "", "[]", "  - matches: [{path: {value: /t}, headers: [{name: a, value: '1'}]}, {path: {value: /t}, headers: [{name: b, value: '1'}]}]\n"+backend),
			kongdouble.Request{Path: "/t", Headers: http.Header{"A": {"1"}, "B": {"1"}}}, "ns/r/0/0"},
		{"an exact hostname beats a wildcard",
			route("ns", "wild", "", "['*.example.com']", "  - matches: [{path: {type: Exact, value: /p}}]\n"+backend) +
				route("ns", "exact", "", "[api.example.com]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Host: "api.example.com", Path: "/p"}, "ns/exact/0/0"},
		{"an exact path outranks a method and headers on the same hostname",
			route("ns", "exact", "", "[api.example.com]", "  - matches: [{path: {type: Exact, value: /p}}]\n"+backend) +
				route("ns", "more", "", "[api.example.com]", "  - matches: [{path: {value: /}, method: GET, headers: [{name: a, value: '1'}]}]\n"+backend),
			kongdouble.Request{Host: "api.example.com", Path: "/p", Method: "GET", Headers: http.Header{"A": {"1"}}}, "ns/exact/0/0"},
		{"a longer wildcard beats a shorter one",
			route("ns", "short", "", "['*.example.com']", "  - matches: [{path: {value: /}}]\n"+backend) +
				route("ns", "long", "", "['*.api.example.com']", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Host: "v1.api.example.com", Path: "/"}, "ns/long/0/0"},
		{"hostnames match regardless of letter case",
			route("ns", "exact", "", "[api.example.com]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Host: "API.Example.COM", Path: "/"}, "ns/exact/0/0"},
		{"a regular expression matches the whole path",
			route("ns", "re", "", "[]", "  - matches: [{path: {type: RegularExpression, value: '/v[0-9]+'}}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/v1/extra"}, "ns/fallback/0/0"},
		{"oldest route wins a tie at the root",
			route("ns", "aaa-new", "2026-02-01T00:00:00Z", "[]", "  - matches: [{path: {value: /}}]\n"+backend) +
				route("ns", "zzz-old", "2026-01-01T00:00:00Z", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/"}, "ns/zzz-old/0/0"},
		{"a regular expression may start with ^ and use |",
			route("ns", "re", "", "[]", "  - matches: [{path: {type: RegularExpression, value: '^/v1|/v2'}}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/v2"}, "ns/re/0/0"},
		{"a longer prefix outranks headers",
			route("ns", "header", "", "[]", "  - matches: [{path: {value: /}, headers: [{name: a, value: '1'}]}]\n"+backend) +
				route("ns", "prefix", "", "[]", "  - matches: [{path: {value: /p}}]\n"+backend),
			kongdouble.Request{Path: "/p", Headers: http.Header{"A": {"1"}}}, "ns/prefix/0/0"},
		{"percent-encoded paths match as Kong normalizes them: other characters decoded",
			route("ns", "space", "", "[]", "  - matches: [{path: {type: Exact, value: /docs/a%20b}}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/docs/a%20b"}, "ns/space/0/0"},
		{"percent-encoded paths: unreserved decoded",
			route("ns", "tilde", "", "[]", "  - matches: [{path: {value: /%7Euser}}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/~user/x"}, "ns/tilde/0/0"},
		{"percent-encoded paths: reserved kept, hex upper-cased",
			route("ns", "semicolon", "", "[]", "  - matches: [{path: {type: Exact, value: /x%3bcolon}}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/x%3Bcolon"}, "ns/semicolon/0/0"},
		{"header names with underscores are matched",
			route("ns", "underscore", "", "[]", "  - matches: [{path: {value: /}, headers: [{name: X_Env, value: prod}]}]\n"+backend) +
				route("ns", "fallback", "", "[]", "  - matches: [{path: {value: /}}]\n"+backend),
			kongdouble.Request{Path: "/", Headers: http.Header{"X_Env": {"prod"}}}, "ns/underscore/0/0"},
		{"the filters of a weight-0 backendRef do not refuse its rule",
			route("ns", "weighted", "", "[]", "  - matches: [{path: {value: /w}}]\n"+
				"    backendRefs:\n"+
				"    - {name: app, namespace: ns, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-a, value: '1'}]}}]}\n"+
				"    - {name: app, namespace: ns, port: 80, weight: 0, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-b, value: '1'}]}}]}\n"),
			kongdouble.Request{Path: "/w"}, "ns/weighted/0/0"},
	}
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		for _, c := range cases {
			if flavor != snapshot.RouterExpressions && strings.Contains(c.routes, "queryParams") {
				continue // the traditional router has no query matching
			}
			t.Run(flavor+"/"+c.name, func(t *testing.T) { checkPrecedence(t, flavor, precedenceBase+c.routes, c.req, c.want) })
		}
	}
}

// checkPrecedence translates objects for a Kong of the router flavor,
// loads the result into the double and checks which rule serves req.
func checkPrecedence(t *testing.T, flavor, objects string, req kongdouble.Request, want string) {
	t.Helper()
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(objects), t.Name()); err != nil {
		t.Fatal(err)
	}
	snap := objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(flavor))
	res := translate.Translate(snap, nil)
	doc, err := declarativeJSON(res)
	if err != nil {
		t.Fatal(err)
	}
	kong := kongdouble.New(kongdouble.Options{RouterFlavor: flavor})
	defer kong.Close()
	if status, body := load(kong, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	req.ListenPort = 8000
	if req.Host == "" {
		req.Host = "any.example.com"
	}
	d, ok := kong.Route(req)
	if !ok {
		t.Fatalf("no route for %+v", req)
	}
	if got := ruleOf(d.RouteName); got != want {
		t.Fatalf("served by %s (%s), want %s", got, d.RouteName, want)
	}
}

// ruleOf reads "<kind>.<ns>.<name>.<rule>.<match>.<place>" back as
// ns/name/rule/match.
func ruleOf(kongRoute string) string {
	_, rest, _ := strings.Cut(kongRoute, ".") // the kind
	ns, rest, _ := strings.Cut(rest, ".")
	parts := strings.Split(rest, ".")
	if len(parts) < 4 {
		return kongRoute
	}
	n := len(parts)
	return ns + "/" + strings.Join(parts[:n-3], ".") + "/" + parts[n-3] + "/" + parts[n-2]
}

// TestNewRouteMovesNoPriority: the newest route takes the next priority
// down in its class, so creating a route changes no other route of the
// document (Kong, and the double's incremental load, see a small change).
func TestNewRouteMovesNoPriority(t *testing.T) {
	snap := benchSnapshot(50)
	priorities := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, s := range translate.Translate(snap, nil).Config.Services {
			for _, r := range s.Routes {
				out[r.Name] = r.Priority
			}
		}
		return out
	}
	before := priorities()
	newest := snap.HTTPRoutes[0].DeepCopy()
	newest.Name, newest.CreationTimestamp = "newest", metav1.NewTime(time.Unix(2_000_000_000, 0))
	snap.HTTPRoutes = append(snap.HTTPRoutes, newest)
	after := priorities()
	if len(after) != len(before)+2 {
		t.Fatalf("%d Kong routes after adding one HTTPRoute with two matches to %d", len(after), len(before))
	}
	for name, p := range before {
		if after[name] != p {
			t.Errorf("%s: priority %d became %d", name, p, after[name])
		}
	}
}
