package informers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/test/cluster"
)

// TestRoutesOfOtherGatewaysWakeNothing, on a real API server: creating and
// editing a route that names another Gateway wakes no sync, and it is
// cached as a stub; once it names the bound Gateway it wakes one and is
// cached whole.
func TestRoutesOfOtherGatewaysWakeNothing(t *testing.T) {
	env, err := cluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trigger := NewTrigger(time.Millisecond, time.Millisecond)
	c, err := New(env.Kube, env.GW, Scope{ControllerName: snapshot.DefaultControllerName,
		Gateways: []types.NamespacedName{{Namespace: "default", Name: "kong"}}}, trigger)
	if err != nil {
		t.Fatal(err)
	}
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if _, err := c.Snapshot(snapshot.Kong{}); err != nil {
		t.Fatal(err)
	}
	select { // the syncs the initial lists asked for
	case <-trigger.notify:
	default:
	}
	route := func(name, gateway string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gateway)}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(name + ".example")}}}
	}
	routes := env.GW.GatewayV1().HTTPRoutes("default")
	// wakes waits for the next sync request and tells whether one came
	// after since other than the last (Trigger keeps the two latest).
	wakes := func(since time.Time) (others bool) {
		t.Helper()
		if err := trigger.Wait(ctx); err != nil {
			t.Fatal("no sync requested:", err)
		}
		trigger.mu.Lock()
		defer trigger.mu.Unlock()
		return trigger.prev.After(since)
	}

	start := time.Now()
	other, err := routes.Create(ctx, route("other", "another"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Spec.Hostnames = []gwv1.Hostname{"edited.example"}
	if other, err = routes.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A route of the bound Gateway, created last: the handler sees the
	// events in order, so when its sync request arrives the other route's
	// two events were handled.
	if _, err := routes.Create(ctx, route("own", "kong"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if wakes(start) {
		t.Error("a route of another Gateway asked for a sync")
	}
	cached, err := c.httpRoutes.HTTPRoutes("default").Get("other")
	if err != nil || cached.Spec.Hostnames != nil || len(cached.Spec.ParentRefs) != 1 {
		t.Fatalf("cached route of another Gateway: %+v, %v", cached, err)
	}

	other.Spec.ParentRefs[0].Name = "kong"
	if _, err := routes.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wakes(time.Now())
	cached, err = c.httpRoutes.HTTPRoutes("default").Get("other")
	if err != nil || len(cached.Spec.Hostnames) != 1 || cached.Spec.Hostnames[0] != "edited.example" {
		t.Fatalf("route that now names the Gateway, as cached: %+v, %v", cached, err)
	}
}
