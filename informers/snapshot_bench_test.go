package informers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
)

// BenchmarkSnapshot is a sync's Cache.Snapshot with n HTTPRoutes, each on
// its own Service with one EndpointSlice, after one Service and one
// EndpointSlice changed (as the informers' handlers record them).
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{3_300, 10_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			var kube, gw []runtime.Object
			port := gwv1.PortNumber(80)
			for i := range n {
				ns, name := fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i)
				kube = append(kube, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
					&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x",
						Labels: map[string]string{discoveryv1.LabelServiceName: name}}})
				gw = append(gw, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route-%d", i)},
					Spec: gwv1.HTTPRouteSpec{
						CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
						Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("app-%d.example.com", i))},
						Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
							BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: &port}}}}}},
					}})
			}
			c, err := New(kubefake.NewClientset(kube...), gwfake.NewClientset(gw...), Scope{ControllerName: snapshot.DefaultControllerName}, NewTrigger(time.Millisecond, time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.Start(ctx)
			if !c.WaitForSync(ctx) {
				b.Fatal("caches did not sync")
			}
			services, slices, _ := c.serviceIndex.handOut()
			svc := services[types.NamespacedName{Namespace: "ns-0", Name: "svc-0"}]
			slice := slices[types.NamespacedName{Namespace: "ns-0", Name: "svc-0"}][0]
			b.ReportAllocs()
			for b.Loop() {
				c.serviceIndex.put(svc, svc)
				c.serviceIndex.put(slice, slice)
				if _, err := c.Snapshot(snapshot.Kong{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
