package translate_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestUnrankedRoutesAreTold: beyond what traditional_compatible can rank on
// one hostname, the routes Kong may prefer to routes Gateway API prefers
// say so on their Accepted condition (still True: they are served); the
// routes ranked first do not, and the expressions router tells none.
func TestUnrankedRoutesAreTold(t *testing.T) {
	objects := func(n int) string {
		var b strings.Builder
		b.WriteString(classYAML + `apiVersion: v1
kind: Service
metadata: {name: kong-proxy, namespace: kong}
spec: {ports: [{name: http, port: 80, targetPort: 8000}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong}
spec:
  gatewayClassName: konglet
  listeners: [{name: http, protocol: HTTP, port: 80}]
`)
		for i := range n {
			fmt.Fprintf(&b, `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r%04d, namespace: kong, generation: 1}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example.com]
  rules: [{matches: [{path: {type: Exact, value: /p%04d}}]}]
`, i, i)
		}
		return b.String()
	}
	const n = 2100 // one hostname's ranks hold 2048 of these routes
	accepted := func(res translate.Result, i int) metav1.Condition {
		t.Helper()
		parents := res.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "kong", Name: fmt.Sprintf("r%04d", i)}]
		for _, c := range parents[0].Conditions {
			if c.Type == "Accepted" {
				return c
			}
		}
		t.Fatalf("r%04d has no Accepted condition", i)
		return metav1.Condition{}
	}
	told := func(c metav1.Condition) bool { return strings.Contains(c.Message, "no priority left") }

	// Through a Memo, which keeps route outputs and statuses.
	var memo translate.Memo
	snap := buildSnapshot(t, objects(n), types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}, snapshot.DefaultKong(snapshot.RouterTraditionalCompat))
	res := memo.Translate(snap, nil)
	if c := accepted(res, 0); c.Status != metav1.ConditionTrue || told(c) {
		t.Errorf("the route Gateway API prefers most: %+v", c)
	}
	if c := accepted(res, n-1); c.Status != metav1.ConditionTrue || !told(c) {
		t.Errorf("the route Gateway API prefers least, beyond the ranks: %+v", c)
	}
	// The same route, unchanged (the Memo takes its output over) and
	// ranked once 100 others moved to another hostname, loses its note.
	for i, r := range snap.HTTPRoutes {
		if r.Name < "r0100" {
			moved := r.DeepCopy()
			moved.Spec.Hostnames = []gwv1.Hostname{"moved.example.com"}
			moved.Generation++
			snap.HTTPRoutes[i] = moved
		}
	}
	res = memo.Translate(snap, nil)
	if c := accepted(res, n-1); c.Status != metav1.ConditionTrue || told(c) {
		t.Errorf("a route ranked again is still told: %+v", c)
	}
	snap.Kong = snapshot.DefaultKong(snapshot.RouterExpressions)
	res = memo.Translate(snap, nil)
	if c := accepted(res, n-1); told(c) {
		t.Errorf("expressions: %+v", c)
	}
}
