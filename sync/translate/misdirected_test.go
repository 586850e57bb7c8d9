package translate_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// misdirectedObjects: the listeners of the conformance test on port 443
// (any name, an exact one, a wildcard and an exact name under it), two more
// on a second HTTPS port, and an HTTP listener; a route per listener.
var misdirectedObjects = classYAML + `
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec:
  ports:
  - {name: http, port: 80, targetPort: 8000}
  - {name: https, port: 443, targetPort: 8443}
  - {name: alt, port: 8443, targetPort: 8444}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: any, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: secure}]}}
  - {name: second, protocol: HTTPS, port: 443, hostname: second-example.org, tls: {certificateRefs: [{name: secure}]}}
  - {name: wildcard, protocol: HTTPS, port: 443, hostname: "*.wildcard.org", tls: {certificateRefs: [{name: secure}]}}
  - {name: fourth, protocol: HTTPS, port: 443, hostname: fourth-example.wildcard.org, tls: {certificateRefs: [{name: secure}]}}
  - {name: alt-a, protocol: HTTPS, port: 8443, hostname: a.example.com, tls: {certificateRefs: [{name: secure}]}}
  - {name: alt-b, protocol: HTTPS, port: 8443, hostname: b.example.com, tls: {certificateRefs: [{name: secure}]}}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: kong}
spec: {ports: [{port: 80}]}
` + misdirectedRoute("http", "") + misdirectedRoute("any", "example.org") + misdirectedRoute("second", "") +
	misdirectedRoute("wildcard", "") + misdirectedRoute("fourth", "") + misdirectedRoute("alt-a", "") + misdirectedRoute("alt-b", "")

func misdirectedRoute(listener, hostname string) string {
	hostnames := ""
	if hostname != "" {
		hostnames = "\n  hostnames: [" + hostname + "]"
	}
	return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ` + listener + `, namespace: kong}
spec:
  parentRefs: [{name: gw, sectionName: ` + listener + `}]` + hostnames + `
  rules: [{backendRefs: [{name: app, port: 80}]}]
`
}

func misdirectedKong(flavor string) snapshot.Kong {
	kong := snapshot.DefaultKong(flavor)
	kong.ProxyListens = append(kong.ProxyListens, snapshot.Listen{Port: 8444, SSL: true, HTTP2: true})
	kong.PortMaps[8443] = 8444
	return kong
}

func misdirectedResult(t *testing.T, kong snapshot.Kong) translate.Result {
	t.Helper()
	return translate.Translate(buildSnapshot(t, misdirectedObjects+"---\n"+secureSecret(t), types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, kong), nil)
}

func misdirectedDouble(t *testing.T, flavor string, res translate.Result) *kongdouble.Double {
	t.Helper()
	doc, err := declarativeJSON(res)
	if err != nil {
		t.Fatal(err)
	}
	d := kongdouble.New(kongdouble.Options{RouterFlavor: flavor,
		ProxyListeners: []kongdouble.Listener{{Port: 8000}, {Port: 8443, SSL: true, HTTP2: true}, {Port: 8444, SSL: true, HTTP2: true}},
		PortMaps:       []string{"80:8000", "443:8443", "8443:8444"}})
	t.Cleanup(d.Close)
	if status, body := load(d, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	return d
}

// TestMisdirectedRequests: with the expressions router, a request whose
// TLS server name selects one HTTPS listener of its port and whose Host
// selects another is answered 421; one whose Host selects no listener, or
// whose server name selects none (or is absent), is routed by its Host as
// before. The first cases are the conformance test's.
func TestMisdirectedRequests(t *testing.T) {
	res := misdirectedResult(t, misdirectedKong(snapshot.RouterExpressions))
	d := misdirectedDouble(t, snapshot.RouterExpressions, res)
	const misdirected = "421"
	for _, c := range []struct {
		listen          int
		sni, host, want string // want: the route's name, misdirected, or "" for 404
	}{
		{8443, "example.org", "example.org", "any"},
		{8443, "example.org", "second-example.org", misdirected},
		{8443, "example.org", "unknown-example.org", ""},
		{8443, "second-example.org", "second-example.org", "second"},
		{8443, "second-example.org", "example.org", misdirected},
		{8443, "second-example.org", "unknown-example.org", misdirected},
		{8443, "third-example.wildcard.org", "third-example.wildcard.org", "wildcard"},
		{8443, "third-example.wildcard.org", "fith-example.wildcard.org", "wildcard"},
		{8443, "third-example.wildcard.org", "fourth-example.wildcard.org", misdirected},
		{8443, "third-example.wildcard.org", "second-example.org", misdirected},
		{8443, "third-example.wildcard.org", "unknown-example.org", misdirected},
		{8443, "fourth-example.wildcard.org", "fourth-example.wildcard.org", "fourth"},
		{8443, "fourth-example.wildcard.org", "fith-example.wildcard.org", misdirected},
		{8443, "unknown-example.org", "example.org", "any"},
		{8443, "unknown-example.org", "unknown-example.org", ""},
		// Server names in another letter case select the same listener;
		// a Host with a port or a trailing dot selects the same one too.
		{8443, "SECOND-Example.org", "second-example.org", "second"},
		{8443, "Second-example.org", "example.org", misdirected},
		{8443, "example.org", "Second-Example.org.:443", misdirected},
		{8443, "example.org", "second-example.org:8443", misdirected},
		// Without SNI no listener was selected: the Host routes.
		{8443, "", "second-example.org", "second"},
		{8443, "", "example.org", "any"},
		// The second port has listeners of its own: names of port 443
		// select none of them.
		{8444, "a.example.com", "a.example.com", "alt-a"},
		{8444, "a.example.com", "b.example.com", misdirected},
		{8444, "b.example.com", "a.example.com", misdirected},
		{8444, "second-example.org", "a.example.com", "alt-a"},
		{8444, "a.example.com", "second-example.org", ""},
		// On 443, 8443's names fall to the listener without hostname.
		{8443, "a.example.com", "second-example.org", misdirected},
		{8443, "a.example.com", "example.org", "any"},
	} {
		dec, ok := d.Route(kongdouble.Request{ListenPort: c.listen, TLS: true, SNI: c.sni, Host: c.host, Path: "/"})
		got := ""
		switch {
		case ok && strings.HasPrefix(dec.RouteName, "misdirected."):
			got = misdirected
			if !slices.ContainsFunc(dec.Plugins, func(p map[string]any) bool { return p["name"] == "request-termination" }) {
				t.Errorf("%s: no request-termination", dec.RouteName)
			}
		case ok:
			got = strings.Split(ruleOf(dec.RouteName), "/")[1]
		}
		if got != c.want {
			t.Errorf("listen %d, SNI %q, Host %q: %q (%s), want %q", c.listen, c.sni, c.host, got, dec.RouteName, c.want)
		}
	}
	// Plain HTTP has no server name: never 421.
	if dec, ok := d.Route(kongdouble.Request{ListenPort: 8000, Host: "second-example.org", Path: "/"}); !ok || ruleOf(dec.RouteName) != "kong/http/0/0" {
		t.Errorf("plain HTTP: %q (%v), want kong/http", dec.RouteName, ok)
	}
	claimed(t, res, features.SupportGatewayHTTPSListenerDetectMisdirectedRequests, true)
}

// TestMisdirectedAnswer: through the data plane, the server name of the
// handshake (not a header) selects the listener, and the answer is 421.
func TestMisdirectedAnswer(t *testing.T) {
	d := misdirectedDouble(t, snapshot.RouterExpressions, misdirectedResult(t, misdirectedKong(snapshot.RouterExpressions)))
	h := kongdouble.NewDataPlane(d, nil).Handler(8443, true)
	req := httptest.NewRequest(http.MethodGet, "https://second-example.org/", nil)
	req.TLS = &tls.ConnectionState{ServerName: "example.org"}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Fatalf("SNI example.org, Host second-example.org: %d %s, want 421", rec.Code, rec.Body)
	}
}

// TestMisdirectedNotClaimed: the traditional router has no negation, and
// without the Host normalizer a trailing dot would slip past: no 421 routes
// and no claim there.
func TestMisdirectedNotClaimed(t *testing.T) {
	noLua := misdirectedKong(snapshot.RouterExpressions)
	noLua.PluginsKnown, noLua.EnabledPlugins, noLua.UntrustedLua = true, map[string]bool{"request-termination": true}, "sandbox"
	for name, kong := range map[string]snapshot.Kong{
		"traditional_compatible": misdirectedKong(snapshot.RouterTraditionalCompat),
		"without Lua":            noLua,
	} {
		t.Run(name, func(t *testing.T) {
			res := misdirectedResult(t, kong)
			for _, svc := range res.Config.Services {
				if strings.HasPrefix(svc.Name, "misdirected") {
					t.Errorf("service %s sent", svc.Name)
				}
			}
			claimed(t, res, features.SupportGatewayHTTPSListenerDetectMisdirectedRequests, false)
		})
	}
	d := misdirectedDouble(t, snapshot.RouterTraditionalCompat, misdirectedResult(t, misdirectedKong(snapshot.RouterTraditionalCompat)))
	dec, ok := d.Route(kongdouble.Request{ListenPort: 8443, TLS: true, SNI: "example.org", Host: "second-example.org", Path: "/"})
	if !ok || ruleOf(dec.RouteName) != "kong/second/0/0" {
		t.Errorf("traditional: %q (%v), want the Host's route", dec.RouteName, ok)
	}
}

func claimed(t *testing.T, res translate.Result, feature features.FeatureName, want bool) {
	t.Helper()
	got := slices.ContainsFunc(res.Status.GatewayClasses["konglet"].SupportedFeatures, func(f gwv1.SupportedFeature) bool {
		return f.Name == gwv1.FeatureName(feature)
	})
	if got != want {
		t.Errorf("%s claimed: %v, want %v", feature, got, want)
	}
}
