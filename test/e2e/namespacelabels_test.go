package e2e

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/test/kongdouble"
)

// TestANamespaceLabelledLaterAttachesItsRoutes: on a listener that admits
// the namespaces labelled team=allowed, a route of an unlabelled namespace
// is refused; labelled afterwards (the route, its Service and slice
// unchanged), the namespace's route is served, and unlabelled again it is
// refused again, while a route of another labelled namespace stays served
// throughout (the translation's Memo translates again only the changed
// namespace's routes).
func TestANamespaceLabelledLaterAttachesItsRoutes(t *testing.T) {
	kong := kongdouble.New(kongdouble.Options{})
	defer kong.Close()
	listener := httpListener("http", 80, "")
	listener.AllowedRoutes.Namespaces = &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromSelector),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "allowed"}}}
	w := newWorld(t, listener)
	other := namespace(w.ns + "-b")
	other.Labels = map[string]string{"team": "allowed"}
	w.create(other)
	w.backend(other.Name, "app", 80, 8080, "198.18.0.60")
	otherRoute := w.route("app", []string{"b.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "app", 80, 1)}})
	otherRoute.Namespace = other.Name
	otherRoute.Spec.ParentRefs[0].Namespace = ptr(gwv1.Namespace(w.ns))
	w.create(otherRoute)
	w.backend(w.ns, "web", 80, 8080, "198.18.0.61")
	w.create(w.route("web", []string{"a.example.com"}, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "web", 80, 1)}}))
	startKonglet(t, kong, w.kongletArgs()...)
	refused := func() error {
		return errors.Join(w.routeCond("web", "Accepted", metav1.ConditionFalse, "NotAllowedByListeners"),
			expectNoRoute(kong, "a.example.com", "/")(), expectTargets(kong, "b.example.com", "/", "198.18.0.60:8080")())
	}
	eventually(t, 10*time.Second, "the unlabelled namespace's route refused, the labelled one's served", refused)
	relabel := func(labels string) {
		t.Helper()
		patch := []byte(`{"metadata":{"labels":` + labels + `}}`)
		if _, err := env.Kube.CoreV1().Namespaces().Patch(w.ctx, w.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel(`{"team":"allowed"}`)
	eventually(t, 10*time.Second, "the namespace labelled: its route served, the other still", func() error {
		return errors.Join(w.routeCond("web", "Accepted", metav1.ConditionTrue, "Accepted"),
			expectTargets(kong, "a.example.com", "/", "198.18.0.61:8080")(), expectTargets(kong, "b.example.com", "/", "198.18.0.60:8080")())
	})
	relabel(`{"team":null}`)
	eventually(t, 10*time.Second, "the label gone: the route refused again, the other still served", refused)
}
