package reconcile

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// refusal is Kong's verdict on what one object produced, valid for the
// version of the object Kong saw: any change to the object retries it.
type refusal struct {
	message         string
	resourceVersion string
}

type refusals map[translate.ObjectRef]refusal

// add records the objects behind Kong's flattened errors. It reports false
// when no error could be traced to an object not already left out.
func (r refusals) add(snap *snapshot.Snapshot, result translate.Result, entities []admin.EntityError) bool {
	added := false
	for _, e := range entities {
		ref, ok := result.Owner(e.ID, e.Tags)
		if !ok {
			continue
		}
		if _, known := r[ref]; known {
			continue
		}
		r[ref] = refusal{message: e.Messages(), resourceVersion: resourceVersion(snap, ref)}
		added = true
	}
	return added
}

// forgetChanged drops refusals of objects that changed or are gone, so a
// fixed object comes back without a restart.
func (r refusals) forgetChanged(snap *snapshot.Snapshot) {
	for ref, v := range r {
		if rv := resourceVersion(snap, ref); rv == "" || rv != v.resourceVersion {
			delete(r, ref)
		}
	}
}

func (r refusals) forTranslation() translate.Refusals {
	out := make(translate.Refusals, len(r))
	for ref, v := range r {
		out[ref] = v.message
	}
	return out
}

func (r refusals) describe() string {
	parts := make([]string, 0, len(r))
	for ref, v := range r {
		parts = append(parts, fmt.Sprintf("%s %s/%s: %s", ref.Kind, ref.Namespace, ref.Name, v.message))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func resourceVersion(snap *snapshot.Snapshot, ref translate.ObjectRef) string {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if ref.Kind == "Service" {
		if svc := snap.Services[key]; svc != nil {
			return svc.ResourceVersion
		}
		return ""
	}
	var found string
	find := func(obj metav1.Object) {
		if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
			found = obj.GetResourceVersion()
		}
	}
	switch ref.Kind {
	case "HTTPRoute":
		each(snap.HTTPRoutes, find)
	case "GRPCRoute":
		each(snap.GRPCRoutes, find)
	case "TLSRoute":
		each(snap.TLSRoutes, find)
	case "TCPRoute":
		each(snap.TCPRoutes, find)
	case "UDPRoute":
		each(snap.UDPRoutes, find)
	}
	return found
}

func each[T metav1.Object](list []T, f func(metav1.Object)) {
	for _, o := range list {
		f(o)
	}
}
