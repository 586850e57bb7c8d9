package status

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestSameParentsIsSemantic: sameParents and sameParentRef answer as
// equality.Semantic.DeepEqual does, and compare every field there is (a
// field added to these types must be added to them).
func TestSameParentsIsSemantic(t *testing.T) {
	for typ, fields := range map[reflect.Type]int{
		reflect.TypeFor[gwv1.RouteParentStatus](): 3,
		reflect.TypeFor[gwv1.ParentReference]():   6,
		reflect.TypeFor[metav1.Condition]():       6,
	} {
		if typ.NumField() != fields {
			t.Errorf("%v has %d fields, sameParents compares %d", typ, typ.NumField(), fields)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	str := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := pick("a", "b")
		return &s
	}
	port := func() *gwv1.PortNumber {
		if rng.IntN(3) == 0 {
			return nil
		}
		p := gwv1.PortNumber(80 + rng.IntN(2))
		return &p
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cond := func() metav1.Condition {
		ltt := base.Add(time.Duration(rng.IntN(2)) * time.Second)
		switch rng.IntN(3) {
		case 0:
			ltt = ltt.In(time.FixedZone("x", 3600)) // the same instant elsewhere
		case 1:
			ltt = time.Now().Round(0).Truncate(time.Hour * 1000000) // zero-ish, monotonic stripped
		}
		return metav1.Condition{Type: pick("Accepted", "ResolvedRefs"), Status: metav1.ConditionStatus(pick("True", "False")),
			ObservedGeneration: int64(rng.IntN(2)), LastTransitionTime: metav1.NewTime(ltt), Reason: pick("", "r"), Message: pick("", "m")}
	}
	parents := func() []gwv1.RouteParentStatus {
		n := rng.IntN(3)
		if n == 0 && rng.IntN(2) == 0 {
			return nil
		}
		out := make([]gwv1.RouteParentStatus, n)
		for i := range out {
			out[i] = gwv1.RouteParentStatus{ControllerName: gwv1.GatewayController(pick("c", "d")), ParentRef: gwv1.ParentReference{
				Group: (*gwv1.Group)(str()), Kind: (*gwv1.Kind)(str()), Namespace: (*gwv1.Namespace)(str()), Name: gwv1.ObjectName(pick("a", "b")),
				SectionName: (*gwv1.SectionName)(str()), Port: port()}}
			if k := rng.IntN(3); k > 0 || rng.IntN(2) == 0 {
				out[i].Conditions = make([]metav1.Condition, k)
				for j := range out[i].Conditions {
					out[i].Conditions[j] = cond()
				}
			}
		}
		return out
	}
	equal := 0
	for range 200_000 {
		a, b := parents(), parents()
		if rng.IntN(4) == 0 {
			b = a
		}
		want := equality.Semantic.DeepEqual(a, b)
		if got := sameParents(a, b); got != want {
			t.Fatalf("sameParents = %v, Semantic.DeepEqual = %v:\n%+v\n%+v", got, want, a, b)
		}
		if want {
			equal++
		}
		if len(a) > 0 && len(b) > 0 {
			if got, want := sameParentRef(a[0].ParentRef, b[0].ParentRef), equality.Semantic.DeepEqual(a[0].ParentRef, b[0].ParentRef); got != want {
				t.Fatalf("sameParentRef = %v, Semantic.DeepEqual = %v", got, want)
			}
		}
	}
	if equal < 1000 {
		t.Fatalf("only %d equal pairs: the test compares too little", equal)
	}
}
