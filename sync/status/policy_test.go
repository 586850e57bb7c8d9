package status

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestWriterPolicyAncestors: a BackendTLSPolicy's ancestors of other
// controllers and of Gateways this replica does not serve are kept, ours
// replaced, lastTransitionTime kept where a condition did not change, and
// an unchanged status is not written again.
func TestWriterPolicyAncestors(t *testing.T) {
	ancestor := func(controller, gateway string, accepted metav1.ConditionStatus, ltt metav1.Time) gwv1.PolicyAncestorStatus {
		p := parent(controller, gateway, accepted, ltt)
		return gwv1.PolicyAncestorStatus{AncestorRef: p.ParentRef, ControllerName: p.ControllerName, Conditions: p.Conditions}
	}
	foreign, elsewhere := ancestor("example.com/other", "gw", metav1.ConditionTrue, t0), ancestor(ours, "not-bound", metav1.ConditionTrue, t0)
	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kong", ResourceVersion: "1"},
		Status: gwv1.PolicyStatus{Ancestors: []gwv1.PolicyAncestorStatus{foreign, elsewhere, ancestor(ours, "gw", metav1.ConditionTrue, t0)}}}
	client := fake.NewClientset(policy)
	w := NewWriter(client, []types.NamespacedName{bound}, nil, func() time.Time { return t1 })
	snap := &snapshot.Snapshot{ControllerName: ours, BackendTLSPolicies: []*gwv1.BackendTLSPolicy{policy}}
	want := ancestor(ours, "gw", metav1.ConditionTrue, metav1.Time{})
	want.Conditions = append(want.Conditions, metav1.Condition{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "InvalidKind"})
	desired := translate.Status{BackendTLSPolicies: map[types.NamespacedName][]gwv1.PolicyAncestorStatus{{Namespace: "kong", Name: "p"}: {want}}}
	res, err := w.Write(context.Background(), snap, desired)
	if err != nil || res.Writes != 1 {
		t.Fatalf("writes %d (%v), want 1", res.Writes, err)
	}
	got, err := client.GatewayV1().BackendTLSPolicies("kong").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got.Status.Ancestors
	if len(a) != 3 || a[0].ControllerName != foreign.ControllerName || a[1].AncestorRef.Name != "not-bound" {
		t.Fatalf("ancestors %+v, want the foreign one, ours elsewhere, and the new one", a)
	}
	if c := a[2].Conditions; len(c) != 2 || !c[0].LastTransitionTime.Equal(&t0) || !c[1].LastTransitionTime.Time.Equal(t1) {
		t.Errorf("conditions %+v: want Accepted's time kept (%v) and ResolvedRefs' new (%v)", c, t0, t1)
	}
	snap.BackendTLSPolicies = []*gwv1.BackendTLSPolicy{got}
	if res, err := w.Write(context.Background(), snap, desired); err != nil || res.Writes != 0 {
		t.Errorf("second write of the same status: %d writes (%v), want none", res.Writes, err)
	}
}
