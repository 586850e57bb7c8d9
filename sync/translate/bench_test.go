package translate_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/proxy/declarative"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// benchSnapshot has n HTTPRoutes, each with two matches and one backend, on
// n Services of three ready endpoints each. The routes have a uid and a
// generation, as from an API server.
func benchSnapshot(n int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		ControllerName: snapshot.DefaultControllerName,
		GatewayClasses: map[string]*gwv1.GatewayClass{"konglet": {ObjectMeta: metav1.ObjectMeta{Name: "konglet"}, Spec: gwv1.GatewayClassSpec{ControllerName: snapshot.DefaultControllerName}}},
		Services:       map[types.NamespacedName]*snapshot.Service{},
		EndpointSlices: map[types.NamespacedName][]*snapshot.EndpointSlice{},
		Kong:           snapshot.DefaultKong(snapshot.RouterExpressions),
	}
	all := gwv1.NamespacesFromAll
	s.Gateways = []*gwv1.Gateway{{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "kong"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "konglet", Listeners: []gwv1.Listener{{
			Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}},
		}}},
	}}
	exact, prefix := gwv1.PathMatchExact, gwv1.PathMatchPathPrefix
	port := gwv1.PortNumber(80)
	ready := true
	for i := range n {
		ns := fmt.Sprintf("ns-%d", i%100)
		name := fmt.Sprintf("svc-%d", i)
		key := types.NamespacedName{Namespace: ns, Name: name}
		s.Services[key] = snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-x", Namespace: ns},
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}}}
		for e := range 3 {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("198.18.%d.%d", (i*3+e)/250%250, (i*3+e)%250+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			})
		}
		s.EndpointSlices[key] = []*snapshot.EndpointSlice{snapshot.EndpointSliceOf(slice, false)}
		s.HTTPRoutes = append(s.HTTPRoutes, &gwv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("route-%d", i), Namespace: ns, UID: types.UID(fmt.Sprintf("route-%d-uid", i)), Generation: 1},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("kong"))}}},
				Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("app-%d.example.com", i))},
				Rules: []gwv1.HTTPRouteRule{{
					Matches: []gwv1.HTTPRouteMatch{
						{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/exact")}},
						{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr(fmt.Sprintf("/api/v%d", i%7))}},
					},
					BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
						Name: gwv1.ObjectName(name), Port: &port}}}},
				}},
			},
		})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// BenchmarkTranslate measures snapshot -> Kong config JSON as the sidecar's
// first sync does it (every route translated, and recorded in a new Memo;
// the document encoded, and kept by a new Encoder),
// and reports the size of the document against Kong's 10 MiB default admin
// body limit.
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := benchSnapshot(n)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				var memo translate.Memo
				var enc declarative.Encoder
				res := memo.Translate(snap, nil)
				doc, _, err := enc.MarshalSizes(res.Config)
				if err != nil {
					b.Fatal(err)
				}
				size = len(doc)
			}
			b.ReportMetric(float64(size), "config-bytes")
			b.ReportMetric(float64(size)/float64(10<<20)*100, "%-of-10MiB")
		})
	}
}

// BenchmarkTranslateSync is every sync after the first, as the sidecar runs
// it: through a Memo that holds the previous translation and an Encoder
// that holds the previous document, after one route changed.
// 3,300 routes is the size of the propagation benchmark.
func BenchmarkTranslateSync(b *testing.B) {
	benchSyncs(b, []int{1_000, 3_300, 10_000, 50_000}, func(snap *snapshot.Snapshot, i int) {
		n := len(snap.HTTPRoutes)
		r := snap.HTTPRoutes[i%n].DeepCopy()
		r.Generation++
		snap.HTTPRoutes[i%n] = r
	})
}

// benchSyncs measures, for each number of routes, a sync through a Memo
// and an Encoder that hold the previous translation, after change made
// its i-th change to the snapshot. The caches' versions start at 1 (the
// informers always set them); a change counts its own.
func benchSyncs(b *testing.B, sizes []int, change func(snap *snapshot.Snapshot, i int)) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := benchSnapshot(n)
			snap.BackendsVersion, snap.ClusterIPsVersion = 1, 1
			var memo translate.Memo
			var enc declarative.Encoder
			if _, _, err := enc.MarshalSizes(memo.Translate(snap, nil).Config); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				change(snap, i)
				if _, _, err := enc.MarshalSizes(memo.Translate(snap, nil).Config); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranslateAfterStatusWrites is the sync after a status write to
// every route (konglet writes one to each route that attaches): each route
// is a new object of the same spec, uid and generation. The routes switch
// between two such sets of objects, made in the first two syncs.
func BenchmarkTranslateAfterStatusWrites(b *testing.B) {
	var sets [2][]*gwv1.HTTPRoute
	benchSyncs(b, []int{10_000}, func(snap *snapshot.Snapshot, i int) {
		if sets[i%2] == nil {
			sets[i%2] = make([]*gwv1.HTTPRoute, len(snap.HTTPRoutes))
			for j, r := range snap.HTTPRoutes {
				written := *r
				sets[i%2][j] = &written
			}
		}
		snap.HTTPRoutes = sets[i%2]
	})
}

// BenchmarkEncodeFirstSync is the encoding of a first sync alone (a new
// Encoder each time) of the 10k-route configuration: the part of a first
// translation the encoder's parts change.
func BenchmarkEncodeFirstSync(b *testing.B) {
	var memo translate.Memo
	cfg := memo.Translate(benchSnapshot(10_000), nil).Config
	b.ReportAllocs()
	for b.Loop() {
		var enc declarative.Encoder
		if _, _, err := enc.MarshalSizes(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranslateServiceElsewhere is a sync after a Service was created
// (or deleted) in a namespace no route uses: the cluster's cluster IPs
// changed, which any route's endpoints are checked against.
func BenchmarkTranslateServiceElsewhere(b *testing.B) {
	key := types.NamespacedName{Namespace: "elsewhere", Name: "svc"}
	benchSyncs(b, []int{3_300, 10_000}, func(snap *snapshot.Snapshot, _ int) {
		if _, ok := snap.Services[key]; ok {
			delete(snap.Services, key)
		} else {
			snap.Services[key] = snapshot.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}})
		}
		snap.BackendsVersion++
		snap.ClusterIPsVersion++
	})
}
