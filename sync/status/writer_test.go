package status

import (
	"context"
	"fmt"
	"strconv"
	"sync"
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

// TestWriterDoesNotTrustACacheBehindItsOwnWrite: a status that goes A, B
// and back to A while the cache still shows A (the watch has not brought
// B yet) is written back to A: the cached version is not the one this
// writer wrote last, so the object is read afresh.
func TestWriterDoesNotTrustACacheBehindItsOwnWrite(t *testing.T) {
	a := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, t0)}
	b := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionFalse, t0)}
	cached := routeWith(a...)
	client := fake.NewClientset(cached)
	version := 1
	client.PrependReactor("update", "httproutes", func(act k8stesting.Action) (bool, runtime.Object, error) {
		version++ // the API server's new resourceVersion
		act.(k8stesting.UpdateAction).GetObject().(metav1.Object).SetResourceVersion(strconv.Itoa(version))
		return false, nil, nil
	})
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{cached}}
	for i, want := range [][]gwv1.RouteParentStatus{b, a} {
		desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: want}}
		if res, err := w.Write(context.Background(), snap, desired); err != nil || res.Writes != 1 {
			t.Fatalf("write %d = %+v, %v; want one write", i, res, err)
		}
	}
	if got := stored(t, client).Status.Parents[0].Conditions[0].Status; got != metav1.ConditionTrue {
		t.Fatalf("the route is left at %s, want back at True", got)
	}
}

// TestWriterTrustsACacheBehindItsOwnWriteWhenNothingChanged: the pass
// after a write, while the cache still shows the version the write
// replaced, reads nothing from the API server when the desired entries are
// the ones written (the leader passes every route after each sync, and
// each new route's next pass cost a GET); with other entries it reads the
// object afresh and writes them.
func TestWriterTrustsACacheBehindItsOwnWriteWhenNothingChanged(t *testing.T) {
	cached := routeWith()
	client := fake.NewClientset(cached)
	version := 1
	client.PrependReactor("update", "httproutes", func(act k8stesting.Action) (bool, runtime.Object, error) {
		version++
		act.(k8stesting.UpdateAction).GetObject().(metav1.Object).SetResourceVersion(strconv.Itoa(version))
		return false, nil, nil
	})
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{cached}}
	gets := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	a := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, metav1.Time{})}
	b := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionFalse, metav1.Time{})}
	for i, step := range []struct {
		want          []gwv1.RouteParentStatus
		writes, reads int
	}{
		{a, 1, 0}, // the cached object is all there is to go by
		{a, 0, 0}, // the cache lags behind that write: nothing to do
		{b, 1, 1}, // new entries: read afresh, then written
	} {
		before := gets()
		desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: step.want}}
		res, err := w.Write(context.Background(), snap, desired)
		if err != nil || res.Writes != step.writes || gets()-before != step.reads {
			t.Fatalf("pass %d: %d writes and %d reads (%v), want %d and %d", i, res.Writes, gets()-before, err, step.writes, step.reads)
		}
	}
	if got := stored(t, client).Status.Parents[0].Conditions[0].Status; got != metav1.ConditionFalse {
		t.Fatalf("the route is at %s, want False", got)
	}
}

// versionedGateway is the bound Gateway, at version 1, in a client that,
// as the API server does, refuses a write at another version than the
// stored one (a conflict) and counts versions up.
func versionedGateway(t *testing.T) (*gwv1.Gateway, *fake.Clientset) {
	t.Helper()
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: bound.Namespace, Name: bound.Name, ResourceVersion: "1"}}
	client := fake.NewSimpleClientset() // NewClientset's field manager knows no Gateway resource
	if _, err := client.GatewayV1().Gateways(bound.Namespace).Create(context.Background(), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	version := 1
	client.PrependReactor("update", "gateways", func(act k8stesting.Action) (bool, runtime.Object, error) {
		obj := act.(k8stesting.UpdateAction).GetObject().(metav1.Object)
		if obj.GetResourceVersion() != strconv.Itoa(version) {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gwv1.GroupName, Resource: "gateways"}, bound.Name, nil)
		}
		version++
		obj.SetResourceVersion(strconv.Itoa(version))
		return false, nil, nil
	})
	return gw, client
}

// TestWriterWritesAGatewayAgainWhileTheCacheLags: a Gateway written on one
// sync and changed again on the next (attachedRoutes follows every route
// created), while the cache still shows the version before the first
// write, is written on the object that write returned: no read, no
// conflict, and the conditions keep their lastTransitionTime.
func TestWriterWritesAGatewayAgainWhileTheCacheLags(t *testing.T) {
	cached, client := versionedGateway(t)
	now := t1
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return now })
	snap := &snapshot.Snapshot{ControllerName: ours, Gateways: []*gwv1.Gateway{cached}}
	want := func(attached int32) translate.Status {
		return translate.Status{Gateways: map[types.NamespacedName]gwv1.GatewayStatus{bound: {
			Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"}},
			Listeners:  []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: attached}},
		}}}
	}
	for attached := int32(1); attached <= 2; attached++ {
		res, err := w.Write(context.Background(), snap, want(attached))
		if err != nil || res.Writes != 1 {
			t.Fatalf("attachedRoutes %d: %+v, %v; want one write", attached, res, err)
		}
		now = now.Add(time.Hour)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" {
			t.Fatalf("the Gateway was read from the API server: %v", a)
		}
	}
	g, err := client.GatewayV1().Gateways(bound.Namespace).Get(context.Background(), bound.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Status.Listeners[0].AttachedRoutes != 2 || !g.Status.Conditions[0].LastTransitionTime.Time.Equal(t1.Truncate(time.Second)) {
		t.Fatalf("stored status %+v; want attachedRoutes 2 and Programmed since %v", g.Status, t1)
	}
}

// TestWriterForgetsWhatItWroteWhenItLostTheLead: a writer that lost the
// lead of a Gateway, while another wrote its status, and leads again with
// a cache still at the version before its own last write, reads the
// Gateway afresh rather than taking its own last write as the object (a
// reviewer's sequence): the status ends as this writer wants it.
func TestWriterForgetsWhatItWroteWhenItLostTheLead(t *testing.T) {
	cached, client := versionedGateway(t)
	leading := true
	w := NewWriter(client, []types.NamespacedName{bound}, func(types.NamespacedName) bool { return leading }, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, Gateways: []*gwv1.Gateway{cached}}
	want := translate.Status{Gateways: map[types.NamespacedName]gwv1.GatewayStatus{bound: {
		Listeners: []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: 1}}}}}
	if res, err := w.Write(context.Background(), snap, want); err != nil || res.Writes != 1 {
		t.Fatalf("first write: %+v, %v", res, err)
	}
	leading = false
	if _, err := w.Write(context.Background(), snap, want); err != nil {
		t.Fatal(err)
	}
	// The other leader writes its own view meanwhile.
	other, err := client.GatewayV1().Gateways(bound.Namespace).Get(context.Background(), bound.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Status.Listeners = []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: 7}}
	if _, err := client.GatewayV1().Gateways(bound.Namespace).UpdateStatus(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	leading = true
	if res, err := w.Write(context.Background(), snap, want); err != nil || res.Writes != 1 {
		t.Fatalf("the lead back: %+v, %v; want one write", res, err)
	}
	g, err := client.GatewayV1().Gateways(bound.Namespace).Get(context.Background(), bound.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Status.Listeners[0].AttachedRoutes != 1 {
		t.Fatalf("attachedRoutes %d, want 1", g.Status.Listeners[0].AttachedRoutes)
	}
}

// TestWriterRemovesEntriesOfADeletedListenerSet: once a ListenerSet is
// gone, the entries konglet wrote for it on routes are removed.
func TestWriterRemovesEntriesOfADeletedListenerSet(t *testing.T) {
	setKind := gwv1.Kind("ListenerSet")
	entry := gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Kind: &setKind, Name: "extra", Namespace: &boundNS},
		ControllerName: gwv1.GatewayController(ours),
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: t0}},
	}
	set := &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: "kong"},
		Spec: gwv1.ListenerSetSpec{ParentRef: gwv1.ParentGatewayReference{Name: "gw"}}}
	route := routeWith(entry)
	client := fake.NewClientset(route)
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: {entry}}}
	if _, err := w.Write(context.Background(), &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{route},
		ListenerSets: []*gwv1.ListenerSet{set}}, desired); err != nil {
		t.Fatal(err)
	}
	// The set is deleted: the translation wants no entry for it any more.
	res, err := w.Write(context.Background(), &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{route}}, translate.Status{})
	if err != nil || res.Writes != 1 {
		t.Fatalf("Write = %+v, %v; want the entry removed", res, err)
	}
	if parents := stored(t, client).Status.Parents; len(parents) != 0 {
		t.Fatalf("entries left: %+v", parents)
	}
}

func TestWriterWritesTheGatewaysAttachedListenerSets(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: bound.Name, Namespace: bound.Namespace, ResourceVersion: "1"}}
	client := fake.NewSimpleClientset() // NewClientset's field manager knows no Gateway resource
	if _, err := client.GatewayV1().Gateways(bound.Namespace).Create(context.Background(), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	two := int32(2)
	desired := translate.Status{Gateways: map[types.NamespacedName]gwv1.GatewayStatus{bound: {AttachedListenerSets: &two}}}
	if _, err := w.Write(context.Background(), &snapshot.Snapshot{ControllerName: ours, Gateways: []*gwv1.Gateway{gw}}, desired); err != nil {
		t.Fatal(err)
	}
	got, err := client.GatewayV1().Gateways(bound.Namespace).Get(context.Background(), bound.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Status.AttachedListenerSets; n == nil || *n != 2 {
		t.Fatalf("attachedListenerSets = %v, want 2", n)
	}
}

// TestWriterPassesOverSettledRoutesOnly: a route the last pass left right
// is passed over while its object and its desired entries (the same slice)
// stay the same; a new version of the object, new entries, or a change of
// what the writer leads brings it back into the pass.
func TestWriterPassesOverSettledRoutesOnly(t *testing.T) {
	a := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, t0)}
	cached := routeWith(a...)
	client := fake.NewClientset(cached)
	leading := true
	w := NewWriter(client, []types.NamespacedName{bound, {Namespace: "kong", Name: "other"}},
		func(g types.NamespacedName) bool { return g == bound && leading || g.Name == "other" }, func() time.Time { return t1 })
	pass := func(route *gwv1.HTTPRoute, want []gwv1.RouteParentStatus) int {
		t.Helper()
		desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{routeRef: want}}
		res, err := w.Write(context.Background(), &snapshot.Snapshot{ControllerName: ours, HTTPRoutes: []*gwv1.HTTPRoute{route}}, desired)
		if err != nil {
			t.Fatal(err)
		}
		return res.Writes
	}
	if n := pass(cached, a); n != 0 {
		t.Fatalf("first pass wrote %d, want 0 (the status is already right)", n)
	}
	// Someone else removed konglet's entry: a new version, the same entries.
	changed := routeWith()
	changed.ResourceVersion = "7"
	if _, err := client.GatewayV1().HTTPRoutes("app").UpdateStatus(context.Background(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := pass(changed, a); n != 1 || len(stored(t, client).Status.Parents) != 1 {
		t.Fatalf("a new version of a settled route: %d writes, entries %+v; want ours written back", n, stored(t, client).Status.Parents)
	}
	current := stored(t, client)
	if n := pass(current, a); n != 0 {
		t.Fatalf("settled again: %d writes", n)
	}
	// New entries for the same object.
	b := []gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionFalse, t0)}
	if n := pass(current, b); n != 1 || stored(t, client).Status.Parents[0].Conditions[0].Status != metav1.ConditionFalse {
		t.Fatalf("new entries: %d writes; want them written", n)
	}
	// Leadership of the route's Gateway lost: its entries are no longer
	// ours to write, whatever the last pass settled.
	current = stored(t, client)
	leading = false
	if n := pass(current, a); n != 0 || stored(t, client).Status.Parents[0].Conditions[0].Status != metav1.ConditionFalse {
		t.Fatalf("without the lead: %d writes; want none", n)
	}
	// The lead back: the same object and the same entries as the pass
	// without it, which settled nothing for this writer to write.
	leading = true
	if n := pass(current, a); n != 1 || stored(t, client).Status.Parents[0].Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("the lead back: %d writes; want the entries written", n)
	}
}

// TestWriterTakesPassesAtOnce: passes over parts of the routes may run at
// once (the bench settles thousands of statuses that way).
func TestWriterTakesPassesAtOnce(t *testing.T) {
	var routes []runtime.Object
	desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{}}
	const n, shards = 64, 8
	parts := make([]*snapshot.Snapshot, shards)
	for i := range n {
		r := routeWith()
		r.Name = fmt.Sprintf("r%d", i)
		routes = append(routes, r)
		desired.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "app", Name: r.Name}] =
			[]gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, t0)}
		if parts[i%shards] == nil {
			parts[i%shards] = &snapshot.Snapshot{ControllerName: ours}
		}
		parts[i%shards].HTTPRoutes = append(parts[i%shards].HTTPRoutes, r)
	}
	client := fake.NewClientset(routes...)
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	for _, want := range []int{n, 0} { // the second time, every route is as desired
		var wg sync.WaitGroup
		writes := make([]int, shards)
		for s, part := range parts {
			wg.Go(func() {
				res, err := w.Write(context.Background(), part, desired)
				if err != nil {
					t.Error(err)
				}
				writes[s] = res.Writes
			})
		}
		wg.Wait()
		total := 0
		for _, n := range writes {
			total += n
		}
		if total != want {
			t.Fatalf("%d writes, want %d", total, want)
		}
		for _, part := range parts {
			for i, r := range part.HTTPRoutes {
				part.HTTPRoutes[i], _ = client.GatewayV1().HTTPRoutes("app").Get(context.Background(), r.Name, metav1.GetOptions{})
			}
		}
	}
}
