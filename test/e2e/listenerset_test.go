package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestDeletedListenerSetLeavesNoEntry: a route attached through a
// ListenerSet carries konglet's entry for it; once the set is deleted the
// entry is removed, not left Accepted forever.
func TestDeletedListenerSetLeavesNoEntry(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	w := newWorld(t)
	g := w.getGateway()
	g.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr(gwv1.NamespacesFromSame)}}
	if _, err := env.GW.GatewayV1().Gateways(w.ns).Update(w.ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	set := &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: w.ns}, Spec: gwv1.ListenerSetSpec{
		ParentRef: gwv1.ParentGatewayReference{Name: gwv1.ObjectName(w.gateway)},
		Listeners: []gwv1.ListenerEntry{{Name: "a", Protocol: gwv1.HTTPProtocolType, Port: 80, Hostname: ptr(gwv1.Hostname("a.example.com"))}},
	}}
	if _, err := env.GW.GatewayV1().ListenerSets(w.ns).Create(w.ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.backend(w.ns, "app", 80, 8080, "198.18.0.80")
	r := w.route("on-set", nil, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}})
	r.Spec.ParentRefs = []gwv1.ParentReference{{Kind: ptr(gwv1.Kind("ListenerSet")), Name: "team-a"}}
	w.create(r)
	startKonglet(t, kong, w.kongletArgs()...)

	entries := func() int {
		n := 0
		for _, p := range w.getRoute("on-set").Status.Parents {
			if string(p.ControllerName) == controllerName {
				n++
			}
		}
		return n
	}
	eventually(t, 10*time.Second, "the route is served through the set and has konglet's entry", func() error {
		if n := entries(); n != 1 {
			return fmt.Errorf("%d entries of konglet", n)
		}
		return expectTargets(kong, "a.example.com", "/", "198.18.0.80:8080")()
	})
	if err := env.GW.GatewayV1().ListenerSets(w.ns).Delete(w.ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "konglet's entry for the deleted set is removed", func() error {
		if n := entries(); n != 0 {
			return fmt.Errorf("%d entries of konglet left", n)
		}
		return nil
	})
}
