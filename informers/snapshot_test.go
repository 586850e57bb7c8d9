package informers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
)

// TestSnapshotListsInAFixedOrder: listers list in map order, but two
// snapshots of the same objects must list them alike, or the translation's
// Memo would see a change in every sync.
func TestSnapshotListsInAFixedOrder(t *testing.T) {
	var kube, gw []runtime.Object
	for i := range 8 {
		kube = append(kube, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("web-%d", i),
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}})
		gw = append(gw,
			&gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("grant-%d", i)}},
			&gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("set-%d", 7-i)}})
	}
	c, err := New(kubefake.NewClientset(kube...), gwfake.NewClientset(gw...), Scope{ControllerName: snapshot.DefaultControllerName}, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	s, err := c.Snapshot(snapshot.Kong{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }
	check := func(what string, keys []string, want int) {
		t.Helper()
		if len(keys) != want || !slices.IsSorted(keys) {
			t.Errorf("%s not listed in order: %v", what, keys)
		}
	}
	var grants, sets, eps []string
	for _, g := range s.ReferenceGrants {
		grants = append(grants, key(g))
	}
	for _, l := range s.ListenerSets {
		sets = append(sets, key(l))
	}
	for _, e := range s.EndpointSlices[types.NamespacedName{Namespace: "app", Name: "web"}] {
		eps = append(eps, key(e.GetObjectMeta()))
	}
	check("ReferenceGrants", grants, 8)
	check("ListenerSets", sets, 8)
	check("EndpointSlices", eps, 8)
}

// TestOnlyServicesRoutesNameWakeASync: once a snapshot has shown which
// Services routes of the bound Gateway name, a change to another Service or
// its EndpointSlices wakes nothing; one to a named Service, to konglet's own
// namespace or to a route of the Gateway does, and one to a route of
// another Gateway does not.
func TestOnlyServicesRoutesNameWakeASync(t *testing.T) {
	httpRoute := func(name, gateway, backend string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gateway), Namespace: ptr(gwv1.Namespace("kong"))}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(backend)}}}}}}}}
	}
	route, other := httpRoute("r", "kong", "web"), httpRoute("o", "another", "batch")
	c, err := New(kubefake.NewClientset(), gwfake.NewClientset(route, other), Scope{ControllerName: snapshot.DefaultControllerName, PodNamespace: "kong",
		Gateways: []types.NamespacedName{{Namespace: "kong", Name: "kong"}}}, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The handlers see the objects as the caches keep them.
	slice := func(ns, service string) *snapshot.EndpointSlice {
		return snapshot.EndpointSliceOf(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}}}, false)
	}
	service := func(ns, name string) *snapshot.Service {
		return snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if !c.mayMatter(slice("app", "batch")) {
		t.Fatal("before the first snapshot every change must count")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if _, err := c.Snapshot(snapshot.Kong{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj  any
		want bool
	}{
		{slice("app", "web"), true},
		{slice("app", "batch"), false},
		{service("app", "batch"), false},
		{cache.DeletedFinalStateUnknown{Obj: slice("other", "web")}, false},
		{service("app", "web"), true},
		{slice("kong", "kong-proxy"), true},
		{route, true},
		{other, false},
	} {
		if got := c.mayMatter(tc.obj); got != tc.want {
			t.Errorf("mayMatter(%T %v) = %v, want %v", tc.obj, tc.obj, got, tc.want)
		}
	}
}

// TestServicesWithClusterIPsWakeASyncAnywhere: a Service that appears, goes
// or changes its cluster IPs, in any namespace, wakes a sync, since a
// backend's endpoint may be (or stop being) another namespace's ClusterIP;
// other changes of unnamed Services, and headless or ExternalName ones,
// do not.
func TestServicesWithClusterIPsWakeASyncAnywhere(t *testing.T) {
	c := &Cache{Trigger: NewTrigger(time.Millisecond, time.Millisecond), scope: Scope{PodNamespace: "kong"}, serviceIndex: newBackendIndex()}
	c.backends.Store(&map[types.NamespacedName]bool{{Namespace: "app", Name: "web"}: true})
	events := c.events()
	woke := func() bool {
		select {
		case <-c.Trigger.notify:
			return true
		default:
			return false
		}
	}
	// The handlers see the objects as the caches keep them.
	service := func(name, rv string, ips ...string) *snapshot.Service {
		return snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: name, ResourceVersion: rv}, Spec: corev1.ServiceSpec{ClusterIPs: ips}})
	}
	for _, tc := range []struct {
		name  string
		event func()
		want  bool
	}{
		{"a Service created", func() { events.OnAdd(service("db", "1", "10.96.0.5"), false) }, true},
		{"a headless Service created", func() { events.OnAdd(service("h", "1", corev1.ClusterIPNone), false) }, false},
		{"an ExternalName Service created", func() { events.OnAdd(service("x", "1"), false) }, false},
		{"a Service's labels changed", func() { events.OnUpdate(service("db", "1", "10.96.0.5"), service("db", "2", "10.96.0.5")) }, false},
		{"an ExternalName Service given a ClusterIP", func() { events.OnUpdate(service("x", "1"), service("x", "2", "10.96.0.6")) }, true},
		{"a Service deleted", func() { events.OnDelete(cache.DeletedFinalStateUnknown{Obj: service("db", "2", "10.96.0.5")}) }, true},
		{"another Service's EndpointSlice", func() {
			events.OnAdd(snapshot.EndpointSliceOf(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "db-1",
				Labels: map[string]string{discoveryv1.LabelServiceName: "db"}}}, false), false)
		}, false},
	} {
		tc.event()
		if got := woke(); got != tc.want {
			t.Errorf("%s: woke a sync %v, want %v", tc.name, got, tc.want)
		}
	}
}
