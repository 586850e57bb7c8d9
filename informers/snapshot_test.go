package informers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
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
	c, err := New(kubefake.NewClientset(kube...), gwfake.NewClientset(gw...), Scope{}, NewTrigger(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	s, err := c.Snapshot(snapshot.DefaultControllerName, snapshot.Kong{}, false)
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
		eps = append(eps, key(e))
	}
	check("ReferenceGrants", grants, 8)
	check("ListenerSets", sets, 8)
	check("EndpointSlices", eps, 8)
}
