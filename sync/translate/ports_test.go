package translate_test

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
	"github.com/konglet/konglet/test/kongdouble"
)

// portsObjects: two listeners of one hostname on two Service ports, each
// on its own Kong listen; port_maps maps only the first.
const portsObjects = classYAML + `
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec:
  ports:
  - {name: http, port: 80, targetPort: 8000}
  - {name: alt, port: 8080, targetPort: 8001}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: web, protocol: HTTP, port: 80, hostname: a.example.com}
  - {name: alt, protocol: HTTP, port: 8080, hostname: a.example.com}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: kong}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: kong}
spec:
  parentRefs: [{name: gw, sectionName: web}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: alt, namespace: kong}
spec:
  parentRefs: [{name: gw, sectionName: alt}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`

// TestListenerPortsFollowKong: a route matches the port Kong's router
// computes (the mapped Service port, else the Kong listen port), in both
// flavors, and a listener whose listen port_maps does not cover says so.
func TestListenerPortsFollowKong(t *testing.T) {
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		t.Run(flavor, func(t *testing.T) {
			kong := snapshot.DefaultKong(flavor)
			kong.ProxyListens = []snapshot.Listen{{Port: 8000}, {Port: 8001}}
			kong.PortMaps = map[int]int{80: 8000}
			res := translate.Translate(buildSnapshot(t, portsObjects, types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, kong), nil)
			doc, err := declarativeJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			d := kongdouble.New(kongdouble.Options{RouterFlavor: flavor, PortMaps: []string{"80:8000"},
				ProxyListeners: []kongdouble.Listener{{Port: 8000}, {Port: 8001}}})
			defer d.Close()
			if status, body := load(d, doc); status != http.StatusCreated {
				t.Fatalf("Kong refused: %d %s", status, body)
			}
			for listen, want := range map[int]string{8000: "kong/web/0/0", 8001: "kong/alt/0/0"} {
				for _, host := range []string{"a.example.com", "a.example.com:8080", "a.example.com:80"} {
					dec, ok := d.Route(kongdouble.Request{ListenPort: listen, Host: host, Path: "/"})
					if !ok || ruleOf(dec.RouteName) != want {
						t.Errorf("listen %d, Host %s: served by %q (%v), want %s", listen, host, dec.RouteName, ok, want)
					}
				}
			}
			for _, l := range res.Status.Gateways[types.NamespacedName{Namespace: "kong", Name: "gw"}].Listeners {
				msg := ""
				for _, c := range l.Conditions {
					if c.Type == string(gwv1.ListenerConditionAccepted) {
						msg = c.Message
					}
				}
				if hasNote := strings.Contains(msg, "no port_maps entry"); hasNote != (l.Name == "alt") {
					t.Errorf("listener %s: Accepted message %q", l.Name, msg)
				}
			}
		})
	}
}
