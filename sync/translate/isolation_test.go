package translate_test

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

const isolationInput = classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: any, protocol: HTTP, port: 80}
  - {name: wildcard, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: exact, protocol: HTTP, port: 80, hostname: foo.example.com}
  - {name: other-port, protocol: HTTP, port: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: ns}
spec:
  ports: [{name: a, port: 80, targetPort: 8000}, {name: b, port: 8080, targetPort: 8001}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-any, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: any}]
  rules: [{matches: [{path: {value: /}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-wildcard, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: wildcard}]
  rules: [{matches: [{path: {value: /}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-exact, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: exact}]
  rules: [{matches: [{path: {type: Exact, value: /only}}], backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-other-port, namespace: ns}
spec:
  parentRefs: [{name: gw, sectionName: other-port}]
  rules: [{matches: [{path: {type: Exact, value: /port}}], backendRefs: [{name: app, port: 80}]}]
`

// TestListenerIsolation: a request is served only by routes of the most
// specific listener that matches its port and hostname, never by a route of
// a broader listener, even when that route would match it better, nor by a
// route of another port's listener, whatever port its Host header names.
//
// The traditional router cannot tell the ports of listeners without a
// hostname apart (hostless: cases that need it are skipped there).
func TestListenerIsolation(t *testing.T) {
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) { checkIsolation(t, flavor) })
	}
}

func checkIsolation(t *testing.T, flavor string) {
	snap := isolationSnapshot(t, snapshot.DefaultKong(flavor))
	doc, err := declarativeJSON(translate.Translate(snap, nil))
	if err != nil {
		t.Fatal(err)
	}
	kong := kongdouble.New(kongdouble.Options{
		RouterFlavor:   flavor,
		ProxyListeners: []kongdouble.Listener{{IP: "0.0.0.0", Port: 8000}, {IP: "0.0.0.0", Port: 8001}},
		PortMaps:       []string{"80:8000", "8080:8001"},
	})
	defer kong.Close()
	if status, body := load(kong, doc); status != http.StatusCreated {
		t.Fatalf("Kong refused: %d %s", status, body)
	}
	for _, c := range []struct {
		port       int // Kong's listen: 8000 is port 80, 8001 is 8080
		host, path string
		want       string // ns/route, "" for 404
		hostless   bool   // needs the ports of hostless listeners told apart
	}{
		{8000, "foo.example.com", "/only", "ns/on-exact", false},
		{8000, "foo.example.com", "/elsewhere", "", false}, // not the wildcard's, not the catch-all's
		{8000, "bar.example.com", "/elsewhere", "ns/on-wildcard", false},
		{8000, "a.b.example.com", "/", "ns/on-wildcard", false},
		{8000, "example.org", "/only", "ns/on-any", false},
		{8001, "foo.example.com", "/port", "ns/on-other-port", false},
		{8001, "foo.example.com", "/only", "", true},      // the exact listener is on port 80 only
		{8000, "example.org", "/port", "ns/on-any", true}, // the other port's route is not on 80
		// a Host that names the other port, or ends with a dot, changes nothing
		{8000, "example.org:8080", "/port", "ns/on-any", true},
		{8001, "foo.example.com:80", "/only", "", true},
		{8000, "foo.example.com.", "/elsewhere", "", false},
		{8000, "foo.example.com.:8080", "/only", "ns/on-exact", false},
		{8000, "FOO.example.com.", "/only", "ns/on-exact", false},
	} {
		if c.hostless && flavor != snapshot.RouterExpressions {
			continue
		}
		d, ok := kong.Route(kongdouble.Request{ListenPort: c.port, Host: c.host, Path: c.path, Method: "GET"})
		got := ""
		if ok && !strings.HasPrefix(d.RouteName, "isolation.") {
			got = strings.Join(strings.Split(ruleOf(d.RouteName), "/")[:2], "/")
		}
		if got != c.want {
			t.Errorf("%d %s%s: served by %q, want %q", c.port, c.host, c.path, got, c.want)
		}
	}
}

func isolationSnapshot(t *testing.T, kong snapshot.Kong) *snapshot.Snapshot {
	t.Helper()
	kong.ProxyListens = append(kong.ProxyListens, snapshot.Listen{Port: 8001})
	kong.PortMaps = map[int]int{80: 8000, 8080: 8001, 443: 8443}
	return buildSnapshot(t, isolationInput, types.NamespacedName{Namespace: "ns", Name: "kong-proxy"}, kong)
}

// TestIsolationNeedsLua: where Kong cannot run the Host normalizer, konglet
// sends no Lua, claims no listener isolation, and says why on a Gateway with
// several HTTP listeners; where it can, the plugin's code is the same
// whatever the objects say (nothing is spliced into it).
func TestIsolationNeedsLua(t *testing.T) {
	bundled := map[string]bool{"pre-function": true, "request-transformer": true, "request-termination": true}
	for _, c := range []struct {
		name      string
		kong      func(*snapshot.Kong)
		isolation bool
	}{
		{"offline", func(*snapshot.Kong) {}, true},
		{"sandbox", func(k *snapshot.Kong) { k.PluginsKnown, k.EnabledPlugins, k.UntrustedLua = true, bundled, "sandbox" }, true},
		{"on", func(k *snapshot.Kong) { k.PluginsKnown, k.EnabledPlugins, k.UntrustedLua = true, bundled, "on" }, true},
		{"untrusted_lua off", func(k *snapshot.Kong) { k.PluginsKnown, k.EnabledPlugins, k.UntrustedLua = true, bundled, "off" }, false},
		{"untrusted_lua unknown", func(k *snapshot.Kong) { k.PluginsKnown, k.EnabledPlugins, k.UntrustedLua = true, bundled, "" }, false},
		{"pre-function not enabled", func(k *snapshot.Kong) {
			k.PluginsKnown, k.EnabledPlugins, k.UntrustedLua = true, map[string]bool{"request-termination": true}, "sandbox"
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kong := snapshot.DefaultKong(snapshot.RouterExpressions)
			c.kong(&kong)
			res := translate.Translate(isolationSnapshot(t, kong), nil)
			claimed := slices.ContainsFunc(res.Status.GatewayClasses["konglet"].SupportedFeatures, func(f gwv1.SupportedFeature) bool {
				return f.Name == gwv1.FeatureName(features.SupportGatewayHTTPListenerIsolation)
			})
			accepted := res.Status.Gateways[types.NamespacedName{Namespace: "ns", Name: "gw"}].Conditions[0]
			noted := strings.Contains(accepted.Message, "not isolated")
			if claimed != c.isolation || noted == c.isolation || (len(res.Config.Plugins) == 1) != c.isolation {
				t.Fatalf("isolation claimed %v, noted %v (%q), plugins %d; want isolation %v",
					claimed, noted, accepted.Message, len(res.Config.Plugins), c.isolation)
			}
			if c.isolation && !reflect.DeepEqual(res.Config.Plugins, hostNormalizer(t)) {
				t.Fatal("the plugin differs from one Kong to another")
			}
		})
	}
}

// hostNormalizer is the global plugin of a translation with the default
// Kong (the fuzz target holds every other translation's to it).
func hostNormalizer(t *testing.T) []*declarative.Plugin {
	return translate.Translate(isolationSnapshot(t, snapshot.DefaultKong(snapshot.RouterExpressions)), nil).Config.Plugins
}
