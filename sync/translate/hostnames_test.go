package translate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestHostnamesTheAPIServerWouldRefuse: objects read from files skip the
// CRDs' validation. A route or a listener with a hostname the API server
// would refuse ("0 0", found by fuzzing: Kong's traditional router refused
// the whole configuration for it) is refused on itself, and the rest is
// served, on both router flavors.
func TestHostnamesTheAPIServerWouldRefuse(t *testing.T) {
	in := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: odd, protocol: HTTP, port: 80, hostname: "a b.example.com"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad, namespace: ns}
spec: {parentRefs: [{name: gw, sectionName: http}], hostnames: [good.example.com, "0 0"], rules: [{}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good, namespace: ns}
spec: {parentRefs: [{name: gw, sectionName: http}], hostnames: ["*.Example.com", app.example.com], rules: [{}]}
`
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		var objs snapshot.Objects
		if err := objs.Decode(strings.NewReader(in), "in"); err != nil {
			t.Fatal(err)
		}
		res := translate.Translate(objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(flavor)), nil)
		accepted := func(name string) (string, string) {
			for _, c := range res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: name}][0].Conditions {
				if c.Type == "Accepted" {
					return string(c.Status), c.Reason + ": " + c.Message
				}
			}
			return "", ""
		}
		if status, why := accepted("bad"); status != "False" || why != `UnsupportedValue: hostname "0 0" is not a valid hostname` {
			t.Errorf("%s: the route with hostname \"0 0\": Accepted %s (%s)", flavor, status, why)
		}
		if status, why := accepted("good"); status != "True" {
			t.Errorf("%s: the valid route: Accepted %s (%s)", flavor, status, why)
		}
		for _, l := range res.Status.Gateways[types.NamespacedName{Namespace: "ns", Name: "gw"}].Listeners {
			want := "True"
			if l.Name == "odd" {
				want = "False"
			}
			for _, c := range l.Conditions {
				if c.Type == "Accepted" && string(c.Status) != want {
					t.Errorf("%s: listener %s Accepted %s (%s), want %s", flavor, l.Name, c.Status, c.Message, want)
				}
			}
		}
		var hosts []string
		for _, svc := range res.Config.Services {
			for _, r := range svc.Routes {
				hosts = append(hosts, r.Hosts...)
			}
		}
		if strings.Contains(strings.Join(hosts, ","), " ") {
			t.Errorf("%s: Kong is given a hostname with a space: %v", flavor, hosts)
		}
	}
}
