package translate_test

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// syncer is what the sidecar keeps from one sync to the next.
type syncer struct {
	memo translate.Memo
	enc  declarative.Encoder
}

// sameResult fails unless a translation with the Memo, encoded by the
// Encoder, equals a fresh one.
func sameResult(t *testing.T, step string, s *syncer, snap *snapshot.Snapshot, refused translate.Refusals) translate.Result {
	t.Helper()
	got := s.memo.Translate(snap, refused)
	want := translate.Translate(snap, refused)
	a, _, err := s.enc.MarshalSizes(got.Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := declarative.Marshal(want.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: the config differs with the Memo\n got %s\nwant %s", step, a, b)
	}
	if !reflect.DeepEqual(got.Status, want.Status) {
		t.Fatalf("%s: the statuses differ with the Memo\n got %+v\nwant %+v", step, got.Status, want.Status)
	}
	return got
}

// TestMemoTrustsTheBackendsVersionOnlyWhileItHolds: with the caches'
// BackendsVersion, a Memo takes over routes without looking their backends
// up again while the version is the same, and looks them up again once it
// changed: a Service that lost its port is seen, the output is a fresh
// translation's.
func TestMemoTrustsTheBackendsVersionOnlyWhileItHolds(t *testing.T) {
	snap := benchSnapshot(30)
	snap.BackendsVersion, snap.ClusterIPsVersion = 7, 1
	key := types.NamespacedName{Namespace: "ns-4", Name: "svc-4"}
	var memo syncer
	sameResult(t, "first", &memo, snap, nil)
	sameResult(t, "the same version", &memo, snap, nil)
	// As the caches do: a change copies the map and counts a new version.
	snap.Services = maps.Clone(snap.Services)
	svc := *snap.Services[key]
	svc.Ports = slices.Clone(svc.Ports)
	svc.Ports[0].Port = 81
	snap.Services[key] = &svc
	snap.BackendsVersion = 8
	got := sameResult(t, "a Service changed, a new version", &memo, snap, nil)
	// The caches count a change of cluster IPs apart: every route's
	// endpoints are checked against them.
	snap.Services = maps.Clone(snap.Services)
	snap.Services[types.NamespacedName{Namespace: "ns-99", Name: "grab"}] = snapshot.ServiceOf(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-99", Name: "grab"}, Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.4"}})
	snap.BackendsVersion, snap.ClusterIPsVersion = 9, 2
	sameResult(t, "another namespace's Service takes an endpoint's address", &memo, snap, nil)
	for _, c := range got.Status.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns-4", Name: "route-4"}][0].Conditions {
		if c.Type == "ResolvedRefs" && c.Status != metav1.ConditionFalse {
			t.Fatalf("the route of the Service without its port: ResolvedRefs %s", c.Status)
		}
	}
}

// TestMemoMatchesAFreshTranslation changes, one after the other, each kind
// of input a route's translation reads, and compares a translation that
// reuses the previous one's work with a fresh one.
func TestMemoMatchesAFreshTranslation(t *testing.T) {
	snap := benchSnapshot(30)
	snap.Gateways[0].UID, snap.Gateways[0].Generation = "gw-uid", 1
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("svc-%d", i)}
	}
	var memo syncer
	var refused translate.Refusals
	prev := sameResult(t, "first", &memo, snap, nil)
	changes := []struct {
		name   string
		change func()
		reuses bool // most routes' entities are taken over
	}{
		{"nothing", func() {}, true},
		{"an endpoint is no longer ready", func() {
			slice := *snap.EndpointSlices[key(1)][0]
			slice.Endpoints = slices.Clone(slice.Endpoints)
			slice.Endpoints[0].Ready = false
			snap.EndpointSlices[key(1)] = []*snapshot.EndpointSlice{&slice}
		}, true},
		{"a second slice appears", func() {
			slice := *snap.EndpointSlices[key(2)][0]
			slice.Name += "-2"
			slice.Endpoints = slices.Clone(slice.Endpoints)
			slice.Endpoints[0].Addresses = []string{"192.0.2.1"}
			snap.EndpointSlices[key(2)] = append(snap.EndpointSlices[key(2)], &slice)
		}, true},
		{"a Service switches to Service upstream mode", func() {
			svc := *snap.Services[key(3)]
			svc.UpstreamMode = snapshot.UpstreamModeService
			snap.Services[key(3)] = &svc
		}, true},
		{"a Service loses its port", func() {
			svc := *snap.Services[key(4)]
			svc.Ports = slices.Clone(svc.Ports)
			svc.Ports[0].Port = 81
			snap.Services[key(4)] = &svc
		}, true},
		{"a Service is deleted", func() { delete(snap.Services, key(5)) }, true},
		// Every route's endpoints are checked against every Service's
		// cluster IPs: another namespace's Service that takes svc-1's
		// endpoint address refuses route-1's backend, reused or not; the
		// other routes are taken over.
		{"another namespace's Service takes an endpoint's address as its ClusterIP", func() {
			snap.Services[types.NamespacedName{Namespace: "ns-99", Name: "grab"}] = snapshot.ServiceOf(&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns-99", Name: "grab"}, Spec: corev1.ServiceSpec{ClusterIP: "198.18.0.4", ClusterIPs: []string{"198.18.0.4"}}})
		}, true},
		{"a Service elsewhere gets a cluster IP no endpoint has", func() {
			snap.Services[types.NamespacedName{Namespace: "ns-99", Name: "elsewhere"}] = snapshot.ServiceOf(&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns-99", Name: "elsewhere"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", ClusterIPs: []string{"10.96.0.9"}}})
		}, true},
		{"the Service that took the endpoint's address is deleted", func() {
			delete(snap.Services, types.NamespacedName{Namespace: "ns-99", Name: "grab"})
		}, true},
		{"a route splits its traffic", func() {
			r := snap.HTTPRoutes[6].DeepCopy()
			second := r.Spec.Rules[0].BackendRefs[0]
			second.Weight = ptr(int32(3))
			r.Spec.Rules[0].BackendRefs = append(r.Spec.Rules[0].BackendRefs, second)
			r.Generation++
			snap.HTTPRoutes[6] = r
		}, true},
		{"an older route appears (every rank moves)", func() {
			r := snap.HTTPRoutes[7].DeepCopy()
			r.Name, r.UID, r.CreationTimestamp = "ancient", "ancient-uid", metav1.NewTime(time.Unix(1, 0))
			r.Spec.Hostnames = []gwv1.Hostname{"app-7.example.com"} // competes with route-7
			snap.HTTPRoutes = append(snap.HTTPRoutes, r)
		}, true},
		{"a route is deleted", func() { snap.HTTPRoutes = snap.HTTPRoutes[1:] }, true},
		{"a route ranked just before an identical one appears", func() {
			r := snap.HTTPRoutes[10].DeepCopy()
			r.Name, r.UID = "a-"+r.Name, "a-"+r.UID // same namespace, sorts first
			snap.HTTPRoutes = append(snap.HTTPRoutes, r)
		}, true},
		{"a route leaves the Gateway", func() {
			r := snap.HTTPRoutes[8].DeepCopy()
			r.Spec.ParentRefs[0].Name = "other"
			r.Generation++
			snap.HTTPRoutes[8] = r
		}, true},
		{"Kong refuses a route", func() {
			refused = translate.Refusals{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "ns-9", Name: "route-9"}: "no"}
		}, false},
		{"Kong refuses a Service", func() { refused = translate.Refusals{{Kind: "Service", Namespace: "ns-10", Name: "svc-10"}: "no"} }, false},
		{"the refusals are gone", func() { refused = nil }, false},
		{"every Service goes to Service upstream mode", func() { snap.ServiceUpstream = true }, false},
		{"the Gateway's status changes (same uid and generation)", func() {
			g := snap.Gateways[0].DeepCopy()
			g.Status.Addresses = []gwv1.GatewayStatusAddress{{Value: "192.0.2.9"}}
			snap.Gateways[0] = g
		}, true},
		{"the Gateway's listener changes its hostname", func() {
			g := snap.Gateways[0].DeepCopy()
			g.Spec.Listeners[0].Hostname = ptr(gwv1.Hostname("*.example.org")) // no route matches
			g.Generation++
			snap.Gateways[0] = g
		}, false},
		{"a Gateway without uid changes (tests, offline)", func() {
			g := snap.Gateways[0].DeepCopy()
			g.UID, g.Generation = "", 0
			g.Spec.Listeners[0].Hostname = nil
			snap.Gateways[0] = g
		}, false},
		{"Kong changes its router", func() { snap.Kong = snapshot.DefaultKong(snapshot.RouterTraditionalCompat) }, false},
		{"a route is deleted (every regex_priority after it moves)", func() { snap.HTTPRoutes = snap.HTTPRoutes[1:] }, true},
		// A status write gives a route a new object of the same spec.
		{"every route's status is written (same uid and generation)", func() {
			snap.HTTPRoutes = slices.Clone(snap.HTTPRoutes)
			for i, r := range snap.HTTPRoutes {
				r = r.DeepCopy()
				r.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "example.com/other"}}
				snap.HTTPRoutes[i] = r
			}
		}, true},
		{"a route's spec changes after its status was written", func() {
			r := snap.HTTPRoutes[3].DeepCopy()
			r.Spec.Hostnames = []gwv1.Hostname{"moved.example.com"}
			r.Generation++
			snap.HTTPRoutes[3] = r
		}, true},
		{"a route is deleted and created again with another spec (generation 1 both times)", func() {
			r := snap.HTTPRoutes[4].DeepCopy()
			r.UID, r.CreationTimestamp = "again-uid", metav1.NewTime(time.Unix(2, 0)) // the oldest now
			r.Spec.Hostnames = []gwv1.Hostname{"again.example.com"}
			snap.HTTPRoutes[4] = r
		}, true},
		// Informers list an object once; a Memo takes an output once
		// whatever its input.
		{"a route is listed twice", func() { snap.HTTPRoutes = append(slices.Clip(snap.HTTPRoutes), snap.HTTPRoutes[0]) }, true},
		{"and once again", func() { snap.HTTPRoutes = snap.HTTPRoutes[:len(snap.HTTPRoutes)-1] }, true},
		{"another route has a route's uid and generation", func() {
			r := snap.HTTPRoutes[5].DeepCopy()
			r.Name = "same-uid"
			snap.HTTPRoutes = append([]*gwv1.HTTPRoute{r}, snap.HTTPRoutes...)
		}, true},
		{"and goes", func() { snap.HTTPRoutes = snap.HTTPRoutes[1:] }, true},
		{"nothing again", func() {}, true},
	}
	for _, c := range changes {
		c.change()
		got := sameResult(t, c.name, &memo, snap, refused)
		reused := 0
		for _, s := range got.Config.Services {
			for _, p := range prev.Config.Services {
				if s == p {
					reused++
				}
			}
		}
		if c.reuses && reused < len(got.Config.Services)-5 {
			t.Errorf("%s: only %d of %d services taken over", c.name, reused, len(got.Config.Services))
		}
		prev = got
	}
}

// TestMemoLetsGoOfARouteAStatusWriteReplaced: a route's output taken over
// for a newer object of the same spec (after a status write) reads the new
// object; the Memo keeps the old one alive no longer (after a status write
// to every route, the old objects would double the routes' memory).
func TestMemoLetsGoOfARouteAStatusWriteReplaced(t *testing.T) {
	snap := benchSnapshot(3)
	var memo translate.Memo
	before := memo.Translate(snap, nil).Config.Services
	written := snap.HTTPRoutes[1].DeepCopy()
	written.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "example.com/other"}}
	old := weak.Make(snap.HTTPRoutes[1])
	snap.HTTPRoutes = []*gwv1.HTTPRoute{snap.HTTPRoutes[0], written, snap.HTTPRoutes[2]}
	after := memo.Translate(snap, nil).Config.Services
	if !slices.Contains(before, after[1]) {
		t.Fatalf("the route's service %s was translated again, not taken over", after[1].Name)
	}
	runtime.GC()
	if old.Value() != nil {
		t.Fatal("the Memo keeps the route's old object alive")
	}
	runtime.KeepAlive(&memo)
}

// TestMemoCountsTheRoutesItTranslates: a Result says how many routes of
// the bound Gateways were translated anew, the figure
// konglet_routes_translated_total adds up.
func TestMemoCountsTheRoutesItTranslates(t *testing.T) {
	snap := benchSnapshot(30)
	var memo translate.Memo
	steps := []struct {
		name   string
		change func()
		want   int
	}{
		{"first", func() {}, 30},
		{"nothing changed", func() {}, 0},
		{"a route edited", func() {
			r := snap.HTTPRoutes[3].DeepCopy()
			r.Spec.Hostnames, r.Generation = []gwv1.Hostname{"edited.example.com"}, r.Generation+1
			snap.HTTPRoutes[3] = r
		}, 1},
		{"a status write to every route", func() {
			for i, r := range snap.HTTPRoutes {
				r = r.DeepCopy()
				r.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "example.com/other"}}
				snap.HTTPRoutes[i] = r
			}
		}, 0},
		{"a route of another Gateway appears", func() {
			r := snap.HTTPRoutes[4].DeepCopy()
			r.Name, r.UID, r.Spec.ParentRefs[0].Name = "elsewhere", "elsewhere-uid", "another-gateway"
			snap.HTTPRoutes = append(snap.HTTPRoutes, r)
		}, 0},
		{"Kong's router changed", func() { snap.Kong = snapshot.DefaultKong(snapshot.RouterTraditionalCompat) }, 30},
	}
	for _, step := range steps {
		step.change()
		if got := memo.Translate(snap, nil).RoutesTranslated; got != step.want {
			t.Errorf("%s: %d routes translated, want %d", step.name, got, step.want)
		}
	}
	if got := translate.Translate(snap, nil).RoutesTranslated; got != 30 {
		t.Errorf("without a Memo: %d routes translated, want 30", got)
	}
}

// TestMemoAcrossGoldenInputs runs every golden input through one Memo and
// Encoder, in both orders and for both routers, against fresh
// translations: nothing of one input may leak into the next.
func TestMemoAcrossGoldenInputs(t *testing.T) {
	inputs := goldenInputs(t, false)
	for _, flavor := range []string{snapshot.RouterExpressions, snapshot.RouterTraditionalCompat} {
		var snaps []*snapshot.Snapshot
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			snaps = append(snaps, loadSnapshot(t, flavor, inputs[name]...))
		}
		var memo syncer
		for i, s := range append(snaps, snaps...) {
			sameResult(t, fmt.Sprintf("%s: input %d", flavor, i%len(snaps)), &memo, s, nil)
			sameResult(t, fmt.Sprintf("%s: input %d again", flavor, i%len(snaps)), &memo, s, nil)
		}
	}
}

// TestMemoKeepsEachRoutesOwnUpstream: two routes that split their traffic
// over the same Services, listed in another order, share one upstream in
// the config, tagged with the older route's first Service. When the older
// one goes, the newer one's kept output must carry its own upstream, tagged
// as a fresh translation tags it.
func TestMemoKeepsEachRoutesOwnUpstream(t *testing.T) {
	snap := benchSnapshot(3)
	older, newer := snap.HTTPRoutes[0].DeepCopy(), snap.HTTPRoutes[1].DeepCopy()
	older.CreationTimestamp, newer.CreationTimestamp = metav1.NewTime(time.Unix(1, 0)), metav1.NewTime(time.Unix(2, 0))
	a, b := older.Spec.Rules[0].BackendRefs[0], newer.Spec.Rules[0].BackendRefs[0]
	a.Namespace, b.Namespace = ptr(gwv1.Namespace("ns-0")), ptr(gwv1.Namespace("ns-1"))
	older.Spec.Rules[0].BackendRefs = []gwv1.HTTPBackendRef{a, b}
	newer.Spec.Rules[0].BackendRefs = []gwv1.HTTPBackendRef{b, a}
	snap.HTTPRoutes = []*gwv1.HTTPRoute{older, newer}
	snap.ReferenceGrants = []*gwv1.ReferenceGrant{grantServices("ns-0", "ns-1"), grantServices("ns-1", "ns-0")}
	var memo syncer
	first := sameResult(t, "both routes", &memo, snap, nil)
	shared := slices.DeleteFunc(slices.Clone(first.Config.Upstreams), func(u *declarative.Upstream) bool { return u.Name == translate.MarkerUpstream })
	if len(shared) != 1 {
		t.Fatalf("the routes share %d upstreams, want 1", len(shared))
	}
	snap.HTTPRoutes = []*gwv1.HTTPRoute{newer}
	sameResult(t, "the older route is gone", &memo, snap, nil)
}

// grantServices lets HTTPRoutes in namespace from use the Services of to.
func grantServices(to, from string) *gwv1.ReferenceGrant {
	return &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "from-" + from, Namespace: to}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(from)}},
		To:   []gwv1.ReferenceGrantTo{{Kind: "Service"}},
	}}
}

// TestMemoTrustsNoGenerationZero: objects that carry a uid but no
// generation (from other sources than an API server, which always sets
// it) are compared as objects: a Gateway of generation 0 that changes
// is a change.
func TestMemoTrustsNoGenerationZero(t *testing.T) {
	snap := benchSnapshot(3)
	snap.Gateways[0].UID = "gw-uid"
	var memo syncer
	sameResult(t, "first", &memo, snap, nil)
	gw := snap.Gateways[0].DeepCopy()
	gw.Spec.Listeners[0].Hostname = ptr(gwv1.Hostname("elsewhere.example.com"))
	snap.Gateways = []*gwv1.Gateway{gw}
	if res := sameResult(t, "the listener's hostname changed", &memo, snap, nil); len(res.Config.Services) != 0 {
		t.Fatalf("no route's hostname is the listener's, yet %d services are served", len(res.Config.Services))
	}
}

// TestMemoFollowsAListenerSetsNamespace: a ListenerSet's namespace that
// loses the labels the Gateway's allowedListeners select detaches its
// listeners from routes in other namespaces, which a Memo must not take
// over; a label change of a namespace with no route or ListenerSet
// keeps every route's output.
func TestMemoFollowsAListenerSetsNamespace(t *testing.T) {
	const in = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: konglet}
spec: {controllerName: konglet.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: kong, uid: gw-uid, generation: 1}
spec:
  gatewayClassName: konglet
  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {sets: allowed}}}}
  listeners:
  - {name: http, protocol: HTTP, port: 80, hostname: gw.example.com}
---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {sets: allowed}}
---
apiVersion: v1
kind: Namespace
metadata: {name: idle}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: team, namespace: team, uid: set-uid, generation: 1}
spec:
  parentRef: {name: gw, namespace: kong}
  listeners:
  - {name: a, protocol: HTTP, port: 80, hostname: a.example.com, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: theirs, namespace: other, uid: theirs-uid, generation: 1}
spec:
  parentRef: {name: another-gateway, namespace: kong}
  listeners:
  - {name: a, protocol: HTTP, port: 80, hostname: other.example.com}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: apps}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: on-set, namespace: apps}
spec:
  parentRefs: [{kind: ListenerSet, name: team, namespace: team}]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`
	var objs snapshot.Objects
	if err := objs.Decode(strings.NewReader(in), "in"); err != nil {
		t.Fatal(err)
	}
	snap := objs.Build(snapshot.DefaultControllerName, nil, types.NamespacedName{}, snapshot.DefaultKong(snapshot.RouterExpressions))
	var memo syncer
	if res := sameResult(t, "first", &memo, snap, nil); len(res.Config.Services) != 1 {
		t.Fatalf("the route on the ListenerSet makes %d services, want 1", len(res.Config.Services))
	}
	relabel := func(name string, labels map[string]string) {
		ns := snap.Namespaces[name].DeepCopy()
		ns.Labels = labels
		snap.Namespaces = maps.Clone(snap.Namespaces)
		snap.Namespaces[name] = ns
	}
	relabel("idle", map[string]string{"sets": "allowed"})
	before := memo.memo.Translate(snap, nil).Config.Services[0]
	relabel("idle", nil)
	if again := sameResult(t, "a namespace without routes or ListenerSets relabelled", &memo, snap, nil); again.Config.Services[0] != before {
		t.Error("a namespace without routes or ListenerSets relabelled: the route was translated again")
	}
	relabel("other", map[string]string{"sets": "allowed"})
	if again := sameResult(t, "a namespace with another Gateway's ListenerSet relabelled", &memo, snap, nil); again.Config.Services[0] != before {
		t.Error("a namespace with another Gateway's ListenerSet relabelled: the route was translated again")
	}
	relabel("team", nil)
	if res := sameResult(t, "the ListenerSet's namespace is no longer allowed", &memo, snap, nil); len(res.Config.Services) != 0 {
		t.Fatalf("the route on a ListenerSet the Gateway no longer allows makes %d services", len(res.Config.Services))
	}
}
