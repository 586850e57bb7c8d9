package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// BenchmarkWriteUnchanged is the status writer's pass over n routes whose
// statuses are already as desired: what the leader does after every sync.
func BenchmarkWriteUnchanged(b *testing.B) {
	for _, n := range []int{3_300} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := &snapshot.Snapshot{ControllerName: ours}
			desired := translate.Status{Routes: map[translate.ObjectRef][]gwv1.RouteParentStatus{}}
			for i := range n {
				name := fmt.Sprintf("r-%d", i)
				r := routeWith(parent(ours, "gw", metav1.ConditionTrue, t0))
				r.Name = name
				snap.HTTPRoutes = append(snap.HTTPRoutes, r)
				desired.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: "app", Name: name}] =
					[]gwv1.RouteParentStatus{parent(ours, "gw", metav1.ConditionTrue, metav1.Time{})}
			}
			w := NewWriter(fake.NewClientset(), []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
			b.ReportAllocs()
			for b.Loop() {
				res, err := w.Write(context.Background(), snap, desired)
				if err != nil || res.Writes != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}
