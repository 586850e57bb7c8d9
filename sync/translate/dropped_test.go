package translate_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestFieldsNotServedAreSaid: a field konglet does not serve, or serves
// only approximately, is said on the route, never dropped in silence.
func TestFieldsNotServedAreSaid(t *testing.T) {
	objects := precedenceBase +
		route("ns", "sticky", "", "[]", "  - matches: [{path: {value: /a}}]\n    sessionPersistence: {sessionName: s}\n"+backend+
			"  - matches: [{path: {value: /b}}]\n"+backend) +
		route("ns", "timeout", "", "[]", "  - timeouts: {request: 5s}\n"+backend) +
		route("ns", "half", "", "[]", "  - backendRefs: [{name: app, port: 80}, {name: missing, port: 80}]\n") +
		route("ns", "named", "", "[]", "  - name: checkout\n    backendRefs: [{name: missing, port: 80}]\n")
	res := translate.Translate(buildSnapshot(t, objects, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
	conditionOf := func(name, typ string) string {
		ref := translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: name}
		for _, p := range res.Status.Routes[ref] {
			for _, c := range p.Conditions {
				if c.Type == typ {
					return string(c.Status) + " " + c.Reason + ": " + c.Message
				}
			}
		}
		return ""
	}
	if got := conditionOf("sticky", string(gwv1.RouteConditionPartiallyInvalid)); !strings.Contains(got, "sessionPersistence is not supported") {
		t.Errorf("sticky: PartiallyInvalid %q", got)
	}
	if got := conditionOf("timeout", string(gwv1.RouteConditionAccepted)); !strings.HasPrefix(got, "True Accepted: rule 0: timeouts.request is served as Kong's read and write timeouts") {
		t.Errorf("timeout: Accepted %q", got)
	}
	if got := conditionOf("half", string(gwv1.RouteConditionResolvedRefs)); !strings.Contains(got, "rule 0: the usable backendRefs take the share of those that do not resolve") {
		t.Errorf("half: ResolvedRefs %q", got)
	}
	if got := conditionOf("named", string(gwv1.RouteConditionResolvedRefs)); !strings.Contains(got, "rule 0 (checkout): ") {
		t.Errorf("named: ResolvedRefs %q does not name the rule", got)
	}
}

// TestGatewayAddresses: konglet assigns no address; a Gateway that asks for
// one its publish Service does not have is not Programmed, and one of a
// type konglet does not know is not Accepted.
func TestGatewayAddresses(t *testing.T) {
	base := classYAML + `
apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: ns}
spec: {clusterIP: 10.0.0.7, ports: [{name: http, port: 80, targetPort: 8000}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80}]
`
	for _, c := range []struct{ addresses, accepted, programmed string }{
		{"[{value: 10.0.0.7}]", "True Accepted", "True Programmed"},
		{"[{type: IPAddress}]", "True Accepted", "True Programmed"},
		{"[{value: 10.0.0.8}]", "True Accepted", "False AddressNotAssigned"},
		{"[{type: Hostname, value: gw.example.com}]", "True Accepted", "False AddressNotAssigned"},
		{"[{type: example.com/pool, value: a}]", "False UnsupportedAddress", "False Invalid"},
	} {
		res := translate.Translate(buildSnapshot(t, base+"  addresses: "+c.addresses+"\n", types.NamespacedName{Namespace: "ns", Name: "kong-proxy"}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
		got := map[string]string{}
		for _, cond := range res.Status.Gateways[types.NamespacedName{Namespace: "ns", Name: "gw"}].Conditions {
			got[cond.Type] = string(cond.Status) + " " + cond.Reason
		}
		if got["Accepted"] != c.accepted || got["Programmed"] != c.programmed {
			t.Errorf("addresses %s: Accepted %q, Programmed %q; want %q, %q", c.addresses, got["Accepted"], got["Programmed"], c.accepted, c.programmed)
		}
	}
}

// TestParentRefsOfOneNameAndTwoKinds: a Gateway and a ListenerSet of one
// name are two parents, each with its status.
func TestParentRefsOfOneNameAndTwoKinds(t *testing.T) {
	objects := classYAML + `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared, namespace: ns}
spec:
  gatewayClassName: konglet
  allowedListeners: {namespaces: {from: Same}}
  listeners: [{name: http, protocol: HTTP, port: 80, hostname: gw.example.com}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: shared, namespace: ns}
spec:
  parentRef: {name: shared}
  listeners: [{name: http, protocol: HTTP, port: 80, hostname: set.example.com}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: both, namespace: ns}
spec:
  parentRefs: [{name: shared, sectionName: http}, {kind: ListenerSet, name: shared, sectionName: http}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`
	res := translate.Translate(buildSnapshot(t, objects, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions)), nil)
	parents := res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns", Name: "both"}]
	if len(parents) != 2 {
		t.Fatalf("%d parent statuses, want 2: %+v", len(parents), parents)
	}
	for _, p := range parents {
		if c := p.Conditions[0]; c.Type != "Accepted" || c.Status != "True" {
			t.Errorf("parent %v: %+v", p.ParentRef, c)
		}
	}
}

// TestHTTPRouteAndGRPCRouteShareAHostname: of an HTTPRoute and a GRPCRoute
// on one listener with a common hostname, only the oldest is accepted;
// without a common hostname both are, and a Memo follows the change.
func TestHTTPRouteAndGRPCRouteShareAHostname(t *testing.T) {
	grpc := func(hostname string) string {
		return `---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: ns, creationTimestamp: "2026-02-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  hostnames: [` + hostname + `]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`
	}
	http := route("ns", "web", "2026-01-01T00:00:00Z", "['*.example.com']", "  - matches: [{path: {value: /}}]\n"+backend)
	accepted := func(res translate.Result, kind, name string) string {
		for _, p := range res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: kind, Namespace: "ns", Name: name}] {
			return string(p.Conditions[0].Status)
		}
		return "none"
	}
	var memo translate.Memo
	for _, c := range []struct{ grpcHost, want string }{{"api.example.com", "False"}, {"api.example.org", "True"}} {
		kong := snapshot.DefaultKong(snapshot.RouterExpressions)
		kong.ProxyListens[0].HTTP2 = true
		snap := buildSnapshot(t, precedenceBase+http+grpc(c.grpcHost), types.NamespacedName{}, kong)
		for _, res := range []translate.Result{translate.Translate(snap, nil), memo.Translate(snap, nil)} {
			if got := accepted(res, "HTTPRoute", "web"); got != "True" {
				t.Errorf("GRPCRoute for %s: HTTPRoute Accepted %s", c.grpcHost, got)
			}
			if got := accepted(res, "GRPCRoute", "grpc"); got != c.want {
				t.Errorf("GRPCRoute for %s: GRPCRoute Accepted %s, want %s", c.grpcHost, got, c.want)
			}
		}
	}
}
