package informers

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

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
	c, _ := startedCache(t, kubefake.NewClientset(kube...), gwfake.NewClientset(gw...), Scope{ControllerName: snapshot.DefaultControllerName})
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

// startedCache is the cache of the test's clients and scope, started and
// synced; it stops when the test ends.
func startedCache(t *testing.T, kube kubernetes.Interface, gw gwclient.Interface, scope Scope) (*Cache, context.Context) {
	t.Helper()
	c, err := New(kube, gw, scope, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	return c, ctx
}

// backendRoute is an HTTPRoute of namespace app, on the Gateway of that
// name in namespace kong, to Service backend.
func backendRoute(name, gateway, backend string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gateway), Namespace: ptr(gwv1.Namespace("kong"))}}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(backend)}}}}}}}}
}

// cachedSlice is an EndpointSlice of a Service as the caches keep it (and
// the handlers see it).
func cachedSlice(ns, service string) *snapshot.EndpointSlice {
	return snapshot.EndpointSliceOf(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}}, false)
}

// woke tells whether a trigger's channel (notify: a sync; status: the
// status path) was signalled, and takes the signal.
func woke(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestOnlyServicesRoutesNameWakeASync: once a snapshot has shown which
// Services routes of the bound Gateway name, a change to another Service or
// its EndpointSlices wakes nothing; one to a named Service, to a Service of
// konglet's own namespace or to a route of the Gateway does, and one to a
// route of another Gateway, or to an EndpointSlice of konglet's own
// namespace that no route names, does not (it is for statuses:
// TestReplicaEndpointSlicesWakeOnlyTheStatusPath).
func TestOnlyServicesRoutesNameWakeASync(t *testing.T) {
	route, other := backendRoute("r", "kong", "web"), backendRoute("o", "another", "batch")
	c, err := New(kubefake.NewClientset(), gwfake.NewClientset(route, other), Scope{ControllerName: snapshot.DefaultControllerName, PodNamespace: "kong",
		Gateways: []types.NamespacedName{{Namespace: "kong", Name: "kong"}}}, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	service := func(ns, name string) *snapshot.Service {
		return snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if !c.mayMatter(cachedSlice("app", "batch")) {
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
		{cachedSlice("app", "web"), true},
		{cachedSlice("app", "batch"), false},
		{service("app", "batch"), false},
		{cache.DeletedFinalStateUnknown{Obj: cachedSlice("other", "web")}, false},
		{service("app", "web"), true},
		{cachedSlice("kong", "kong-proxy"), false},
		{service("kong", "kong-proxy"), true},
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
		if got := woke(c.Trigger.notify); got != tc.want {
			t.Errorf("%s: woke a sync %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPodChangesTheTranslationReadsWakeASync: a Pod of konglet's namespace
// whose IPs change (set once it is scheduled) wakes a sync, since Kong
// Pods' IPs are forbidden targets, and so do this Pod's labels where they
// choose the publish Service; a change of conditions only (every load's)
// wakes the status path alone.
func TestPodChangesTheTranslationReadsWakeASync(t *testing.T) {
	pod := func(name, rv, app string, ready corev1.ConditionStatus, ips ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kong", Name: name, ResourceVersion: rv, Labels: map[string]string{"app": app}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return p
	}
	configured := types.NamespacedName{Namespace: "kong", Name: "kong-proxy"}
	for _, tc := range []struct {
		name             string
		publish          types.NamespacedName // the configured publish Service
		old, new         *corev1.Pod
		wantSync, status bool
	}{
		{"a peer's IPs set", types.NamespacedName{}, pod("kong-2", "1", "kong", corev1.ConditionFalse), pod("kong-2", "2", "kong", corev1.ConditionFalse, "10.1.0.7"), true, true},
		{"an IP added", types.NamespacedName{}, pod("kong-2", "2", "kong", corev1.ConditionFalse, "10.1.0.7"), pod("kong-2", "3", "kong", corev1.ConditionFalse, "10.1.0.7", "fd00::7"), true, true},
		{"conditions only", types.NamespacedName{}, pod("kong-1", "3", "kong", corev1.ConditionFalse, "10.1.0.7"), pod("kong-1", "4", "kong", corev1.ConditionTrue, "10.1.0.7"), false, true},
		{"this Pod's labels", types.NamespacedName{}, pod("kong-1", "4", "kong", corev1.ConditionTrue, "10.1.0.7"), pod("kong-1", "5", "edge", corev1.ConditionTrue, "10.1.0.7"), true, true},
		{"this Pod's labels, publish Service configured", configured, pod("kong-1", "4", "kong", corev1.ConditionTrue, "10.1.0.7"), pod("kong-1", "5", "edge", corev1.ConditionTrue, "10.1.0.7"), false, true},
		{"a peer's labels", types.NamespacedName{}, pod("kong-2", "4", "kong", corev1.ConditionTrue, "10.1.0.8"), pod("kong-2", "5", "edge", corev1.ConditionTrue, "10.1.0.8"), false, true},
		{"a resync", types.NamespacedName{}, pod("kong-1", "4", "kong", corev1.ConditionTrue, "10.1.0.7"), pod("kong-1", "4", "kong", corev1.ConditionTrue, "10.1.0.7"), false, false},
	} {
		c := &Cache{Trigger: NewTrigger(time.Millisecond, time.Millisecond), scope: Scope{PodNamespace: "kong", PodName: "kong-1", PublishService: tc.publish},
			serviceIndex: newBackendIndex()}
		c.events().OnUpdate(tc.old, tc.new)
		if got := woke(c.Trigger.notify); got != tc.wantSync {
			t.Errorf("%s: woke a sync %v, want %v", tc.name, got, tc.wantSync)
		}
		if got := woke(c.Trigger.status); got != tc.status {
			t.Errorf("%s: woke the status path %v, want %v", tc.name, got, tc.status)
		}
	}
}

// TestReplicaEndpointSlicesWakeOnlyTheStatusPath: the EndpointSlices of
// konglet's own namespace (where the publish Service is chosen) and of a
// publish Service configured elsewhere tell the leader which replicas are
// ready; a Kong rollout changes them for every Pod, and a sync on every
// replica for each would translate for nothing. One that a route names is
// a backend: it wakes a sync.
func TestReplicaEndpointSlicesWakeOnlyTheStatusPath(t *testing.T) {
	slice := func(ns, service, rv string) *snapshot.EndpointSlice {
		return snapshot.EndpointSliceOf(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-1", ResourceVersion: rv,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}}}, false)
	}
	for _, tc := range []struct {
		name             string
		event            func(cache.ResourceEventHandler)
		wantSync, status bool
	}{
		{"own namespace, created", func(h cache.ResourceEventHandler) { h.OnAdd(slice("kong", "kong-proxy", "1"), false) }, false, true},
		{"own namespace, changed", func(h cache.ResourceEventHandler) {
			h.OnUpdate(slice("kong", "kong-proxy", "1"), slice("kong", "kong-proxy", "2"))
		}, false, true},
		{"own namespace, deleted", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Obj: slice("kong", "kong-proxy", "2")})
		}, false, true},
		{"the configured publish Service's", func(h cache.ResourceEventHandler) { h.OnAdd(slice("edge", "proxy", "1"), false) }, false, true},
		{"own namespace, a backend", func(h cache.ResourceEventHandler) {
			h.OnUpdate(slice("kong", "admin-ui", "1"), slice("kong", "admin-ui", "2"))
		}, true, false},
		{"elsewhere", func(h cache.ResourceEventHandler) { h.OnAdd(slice("edge", "batch", "1"), false) }, false, false},
	} {
		c := &Cache{Trigger: NewTrigger(time.Millisecond, time.Millisecond), serviceIndex: newBackendIndex(),
			scope: Scope{PodNamespace: "kong", PublishService: types.NamespacedName{Namespace: "edge", Name: "proxy"}}}
		c.backends.Store(&map[types.NamespacedName]bool{{Namespace: "kong", Name: "admin-ui"}: true})
		tc.event(c.events())
		if got := woke(c.Trigger.notify); got != tc.wantSync {
			t.Errorf("%s: woke a sync %v, want %v", tc.name, got, tc.wantSync)
		}
		if got := woke(c.Trigger.status); got != tc.status {
			t.Errorf("%s: woke the status path %v, want %v", tc.name, got, tc.status)
		}
	}
}

// TestOnlyNamespaceLabelsWakeASync: the translation reads only a
// Namespace's labels (allowedRoutes and allowedListeners selectors).
func TestOnlyNamespaceLabelsWakeASync(t *testing.T) {
	c := &Cache{Trigger: NewTrigger(time.Millisecond, time.Millisecond), scope: Scope{PodNamespace: "kong"}, serviceIndex: newBackendIndex()}
	namespace := func(rv string, labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", ResourceVersion: rv, Labels: labels, Annotations: annotations}}
	}
	events := c.events()
	for _, tc := range []struct {
		name     string
		old, new *corev1.Namespace
		want     bool
	}{
		{"annotations", namespace("1", map[string]string{"env": "prod"}, nil), namespace("2", map[string]string{"env": "prod"}, map[string]string{"owner": "x"}), false},
		{"labels", namespace("2", map[string]string{"env": "prod"}, nil), namespace("3", map[string]string{"env": "dev"}, nil), true},
	} {
		events.OnUpdate(tc.old, tc.new)
		if got := woke(c.Trigger.notify); got != tc.want {
			t.Errorf("a Namespace's %s changed: woke a sync %v, want %v", tc.name, got, tc.want)
		}
	}
}

// heldNamespaces lists the cached Namespaces, calling during first: a
// snapshot stopped after it read the Services.
type heldNamespaces struct {
	corelisters.NamespaceLister
	during func()
}

func (l *heldNamespaces) List(selector labels.Selector) ([]*corev1.Namespace, error) {
	if during := l.during; during != nil {
		l.during = nil
		during()
	}
	return l.NamespaceLister.List(selector)
}

// TestAServiceNamedWhileSnapshottingWakesASync: a route now names Service
// api, and api's EndpointSlice changes after the snapshot that sees the
// route read the Services, but before it records that api matters. The
// handler took the change for one that does not matter; the snapshot
// notices that it holds another version of api's EndpointSlices than the
// cache, and wakes a sync. With no such change, it wakes none.
func TestAServiceNamedWhileSnapshottingWakesASync(t *testing.T) {
	gw := gwfake.NewClientset(backendRoute("r", "kong", "web"))
	c, ctx := startedCache(t, kubefake.NewClientset(), gw, Scope{ControllerName: snapshot.DefaultControllerName,
		Gateways: []types.NamespacedName{{Namespace: "kong", Name: "kong"}}})
	if _, err := c.Snapshot(snapshot.Kong{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GatewayV1().HTTPRoutes("app").Update(ctx, backendRoute("r", "kong", "api"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if r, err := c.httpRoutes.HTTPRoutes("app").Get("r"); err == nil && r.Spec.Rules[0].BackendRefs[0].Name == "api" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the route's update never reached the cache")
		case <-time.After(time.Millisecond):
		}
	}
	drain := func() bool { return woke(c.Trigger.notify) }
	drain() // the route's update
	events := c.events()
	slice := cachedSlice("app", "api")
	c.namespaces = &heldNamespaces{NamespaceLister: c.namespaces, during: func() {
		events.OnAdd(slice, false)
		if drain() {
			t.Fatal("the change woke a sync by itself: the test no longer stops the snapshot where it should")
		}
	}}
	s, err := c.Snapshot(snapshot.Kong{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.EndpointSlices[types.NamespacedName{Namespace: "app", Name: "api"}]) != 0 {
		t.Fatal("the snapshot holds the change: it read the Services after it")
	}
	if !drain() {
		t.Fatal("a change to a Service the routes name only now, made while the snapshot was taken, woke no sync")
	}
	// The next snapshot holds it, and has nothing more to wake.
	if s, err = c.Snapshot(snapshot.Kong{}); err != nil {
		t.Fatal(err)
	}
	if len(s.EndpointSlices[types.NamespacedName{Namespace: "app", Name: "api"}]) != 1 || drain() {
		t.Fatal("the next snapshot does not hold the change, or woke a sync without one")
	}
}

// heldRoutes lists the cached HTTPRoutes; the first list after hold is set
// then waits for release: a snapshot that has read the routes, stopped
// mid-way.
type heldRoutes struct {
	gwlisters.HTTPRouteLister
	hold          atomic.Bool
	held, release chan struct{}
}

func (l *heldRoutes) List(selector labels.Selector) ([]*gwv1.HTTPRoute, error) {
	routes, err := l.HTTPRouteLister.List(selector)
	if l.hold.CompareAndSwap(true, false) {
		close(l.held)
		<-l.release
	}
	return routes, err
}

// waitsToSnapshot tells whether a goroutine waits for its turn to take a
// snapshot: it is blocked on a mutex that Snapshot itself locks.
func waitsToSnapshot() bool {
	buf := make([]byte, 1<<20)
	for g := range strings.SplitSeq(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
		_, locker, ok := strings.Cut(g, "\nsync.(*Mutex).Lock(")
		// Each frame is two lines: the function, then its file.
		if frames := strings.SplitN(locker, "\n", 3); ok && strings.Contains(g, " [sync.Mutex.Lock") && len(frames) == 3 &&
			strings.HasPrefix(frames[2], "github.com/konglet/konglet/informers.(*Cache).Snapshot(") {
			return true
		}
	}
	return false
}

// TestAnOlderSnapshotNeverRecordsAfterANewerOne: the sync loop and the
// status leader's peer watch take snapshots concurrently. One that read the
// routes before another must not record what they named after it: changes
// to the EndpointSlices of the Service the routes name now would wake no
// sync. (The backends stand for all that Snapshot records.)
func TestAnOlderSnapshotNeverRecordsAfterANewerOne(t *testing.T) {
	// Versions as the API server sets them: an update that keeps its
	// version wakes nothing.
	route := backendRoute("r", "kong", "web")
	route.ResourceVersion = "1"
	gw := gwfake.NewClientset(route)
	c, ctx := startedCache(t, kubefake.NewClientset(), gw, Scope{ControllerName: snapshot.DefaultControllerName, Gateways: []types.NamespacedName{{Namespace: "kong", Name: "kong"}}})
	routes := &heldRoutes{HTTPRouteLister: c.httpRoutes, held: make(chan struct{}), release: make(chan struct{})}
	routes.hold.Store(true)
	c.httpRoutes = routes
	take := func(done chan<- error) {
		_, err := c.Snapshot(snapshot.Kong{})
		done <- err
	}
	older, newer := make(chan error, 1), make(chan error, 1)
	go take(older)
	select {
	case <-routes.held:
	case err := <-older:
		t.Fatal("the snapshot ended before listing the routes:", err)
	}

	// The route moves to Service api; the next snapshot reads that.
	moved := backendRoute("r", "kong", "api")
	moved.ResourceVersion = "2"
	if _, err := gw.GatewayV1().HTTPRoutes("app").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		cached, err := routes.HTTPRouteLister.HTTPRoutes("app").Get("r")
		if err == nil && cached.ResourceVersion == moved.ResourceVersion {
			break
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal("the moved route never reached the cache:", err)
		}
	}
	go take(newer)
	// The newer snapshot ends, or waits for the older one to.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for len(newer) == 0 && !waitsToSnapshot() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the newer snapshot neither ended nor waited for its turn")
		}
	}
	close(routes.release)
	for _, done := range []chan error{older, newer} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if !c.mayMatter(cachedSlice("app", "api")) || c.mayMatter(cachedSlice("app", "web")) {
		t.Error("the older snapshot's backends were recorded last: the EndpointSlices of Service api wake no sync, those of web do")
	}
}

// TestStatusSnapshotRecordsNothing: the status leader's snapshot shows the
// current objects but leaves what the last translation's snapshot named
// (here, which Services' EndpointSlices wake a sync) as it was.
func TestStatusSnapshotRecordsNothing(t *testing.T) {
	route := backendRoute("r", "kong", "web")
	gw := gwfake.NewClientset(route)
	c, ctx := startedCache(t, kubefake.NewClientset(), gw, Scope{ControllerName: snapshot.DefaultControllerName, Gateways: []types.NamespacedName{{Namespace: "kong", Name: "kong"}}})
	if _, err := c.Snapshot(snapshot.Kong{}); err != nil {
		t.Fatal(err)
	}
	changed := backendRoute("r", "kong", "api")
	changed.ResourceVersion = "2"
	if _, err := gw.GatewayV1().HTTPRoutes("app").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		s, err := c.StatusSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(s.HTTPRoutes) == 1 && s.HTTPRoutes[0].Spec.Rules[0].BackendRefs[0].Name == "api" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the status snapshot never showed the changed route")
		case <-tick.C:
		}
	}
	if c.mayMatter(cachedSlice("app", "api")) || !c.mayMatter(cachedSlice("app", "web")) {
		t.Error("a status snapshot changed which Services' EndpointSlices wake a sync")
	}
}
