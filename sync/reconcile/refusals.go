package reconcile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// refusal is Kong's verdict on what one object produced, valid for the
// version of the object Kong saw: any change to the object retries it.
type refusal struct {
	message         string
	resourceVersion string
	// announced is set once an Event told users about it; until then every
	// sync tries again (a replica may not lead yet, a create may fail).
	announced bool
}

type refusals map[translate.ObjectRef]refusal

// add records the objects behind Kong's flattened errors and tells whether
// it left out any it had not before (if not, nothing more can be done).
func (r refusals) add(snap *snapshot.Snapshot, result translate.Result, entities []admin.EntityError) bool {
	added := false
	for _, e := range entities {
		ref, ok := result.Owner(e.ID, e.Name, e.Tags)
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
	if obj := snap.Object(ref.Kind, ref.Namespace, ref.Name); obj != nil {
		return obj.GetResourceVersion()
	}
	return ""
}
