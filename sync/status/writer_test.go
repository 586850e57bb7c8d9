package status

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

const ours = "konglet.dev/gateway-controller"

var (
	bound    = types.NamespacedName{Namespace: "kong", Name: "gw"}
	t0       = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1       = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	boundNS  = gwv1.Namespace("kong")
	routeRef = translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "app", Name: "r"}
)

func parent(controller, gateway string, accepted metav1.ConditionStatus, ltt metav1.Time) gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Name: gwv1.ObjectName(gateway), Namespace: &boundNS},
		ControllerName: gwv1.GatewayController(controller),
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: accepted, Reason: "Accepted", LastTransitionTime: ltt}},
	}
}

func routeWith(parents ...gwv1.RouteParentStatus) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "app", ResourceVersion: "1"},
		Status:     gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: parents}},
	}
}

func write(t *testing.T, route *gwv1.HTTPRoute, want []gwv1.RouteParentStatus) (*fake.Clientset, Result) {
	t.Helper()
	client := fake.NewClientset(route)
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{route}}
	desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: want}}
	res, err := w.Write(context.Background(), snap, desired)
	if err != nil {
		t.Fatal(err)
	}
	return client, res
}

func stored(t *testing.T, client *fake.Clientset) *gwv1.HTTPRoute {
	t.Helper()
	r, err := client.GatewayV1().HTTPRoutes("app").Get(context.Background(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriterKeepsOtherControllersEntries(t *testing.T) {
	foreign := parent("example.com/other", "gw", metav1.ConditionTrue, t0)
	ourOtherGateway := parent(ours, "not-bound", metav1.ConditionTrue, t0)
	stale := parent(ours, "gw", metav1.ConditionFalse, t0)
	client, res := write(t, routeWith(foreign, ourOtherGateway, stale), []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, metav1.Time{})})
	if res.Writes != 1 {
		t.Fatalf("writes = %d, want 1", res.Writes)
	}
	got := stored(t, client).Status.Parents
	if len(got) != 3 {
		t.Fatalf("parents = %+v, want the foreign one, ours for another Gateway, and the new one", got)
	}
	if got[0].ControllerName != "example.com/other" || got[1].ParentRef.Name != "not-bound" {
		t.Fatalf("entries of others were not kept in place: %+v", got)
	}
	if c := got[2].Conditions[0]; c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t1) {
		t.Fatalf("new condition %+v: want True with lastTransitionTime %v (its status changed)", c, t1)
	}
}

func TestWriterRemovesOurEntryWhenDetached(t *testing.T) {
	foreign := parent("example.com/other", "gw", metav1.ConditionTrue, t0)
	client, res := write(t, routeWith(foreign, parent(ours, "gw", metav1.ConditionTrue, t0)), nil)
	if res.Writes != 1 {
		t.Fatalf("writes = %d, want 1", res.Writes)
	}
	if got := stored(t, client).Status.Parents; len(got) != 1 || got[0].ControllerName != "example.com/other" {
		t.Fatalf("parents = %+v, want only the foreign entry", got)
	}
}

func TestWriterSkipsUnchangedStatusAndKeepsTransitionTime(t *testing.T) {
	current := parent(ours, "gw", metav1.ConditionTrue, t0)
	want := parent(ours, "gw", metav1.ConditionTrue, metav1.Time{})
	client, res := write(t, routeWith(current), []gwv1.RouteParentStatus{want})
	if res.Writes != 0 {
		t.Fatalf("writes = %d for an unchanged status, want 0", res.Writes)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			t.Fatalf("unexpected %s %s", a.GetVerb(), a.GetResource())
		}
	}
	// A new message on the same status is written but keeps the time.
	want.Conditions[0].Message = "now with a message"
	client, res = write(t, routeWith(current), []gwv1.RouteParentStatus{want})
	if res.Writes != 1 {
		t.Fatalf("writes = %d, want 1", res.Writes)
	}
	if c := stored(t, client).Status.Parents[0].Conditions[0]; !c.LastTransitionTime.Equal(&t0) || c.Message != "now with a message" {
		t.Fatalf("condition %+v: want the message and lastTransitionTime kept at %v", c, t0)
	}
}

func TestWriterRetriesOnConflict(t *testing.T) {
	route := routeWith()
	client := fake.NewClientset(route)
	conflicts := 1
	client.PrependReactor("update", "httproutes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gwv1.GroupName, Resource: "httproutes"}, "r", nil)
		}
		return false, nil, nil
	})
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{route}}
	desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: {parent(ours, "gw", metav1.ConditionTrue, metav1.Time{})}}}
	res, err := w.Write(context.Background(), snap, desired)
	if err != nil || res.Writes != 1 {
		t.Fatalf("Write = %+v, %v; want one write after one conflict", res, err)
	}
	if len(stored(t, client).Status.Parents) != 1 {
		t.Fatal("the status was not written after the conflict")
	}
}
