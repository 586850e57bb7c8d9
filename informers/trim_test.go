package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestTrimKeepsWhatKongletReads(t *testing.T) {
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r",
		Annotations:   map[string]string{lastApplied: `{"big":"copy"}`, "keep": "me"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	if _, err := trim(route); err != nil {
		t.Fatal(err)
	}
	if route.ManagedFields != nil || route.Annotations[lastApplied] != "" || route.Annotations["keep"] != "me" {
		t.Fatalf("trimmed route: %+v", route.ObjectMeta)
	}

	slice := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "p", UID: "u", ResourceVersion: "7"}},
		{Addresses: []string{"10.0.0.2"}},
	}}
	if _, err := trim(slice); err != nil {
		t.Fatal(err)
	}
	want := corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "p"}
	if ref := slice.Endpoints[0].TargetRef; ref == nil || *ref != want || slice.Endpoints[1].TargetRef != nil {
		t.Fatalf("trimmed endpoints: %+v", slice.Endpoints)
	}
}
