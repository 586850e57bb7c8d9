package reconcile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/konglet/konglet/proxy/admin"
	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// refusal is an object left out of the configuration, valid for the
// version of the object it was decided on: any change to the object
// retries it.
type refusal struct {
	// message is Kong's, or for an object over budget konglet's own.
	message string
	version string
	// size is, for an object over budget, its share of the document when it
	// was last in it (bytes); 0 for Kong's refusals.
	size int
	// announced is set once an Event told users about it; until then every
	// sync tries again (a replica may not lead yet, a create may fail).
	// Objects over budget are told in their status only (the Event says Kong
	// refused).
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
		r[ref] = refusal{message: e.Messages(), version: version(snap, ref)}
		added = true
	}
	return added
}

// forgetChanged drops refusals of objects that changed or are gone, so a
// fixed object comes back without a restart.
func (r refusals) forgetChanged(snap *snapshot.Snapshot) {
	for ref, v := range r {
		if ver := version(snap, ref); ver == "" || ver != v.version {
			delete(r, ref)
		}
	}
}

func (r refusals) forTranslation() translate.Refusals {
	out := make(translate.Refusals, len(r))
	for ref, v := range r {
		switch {
		case v.size > 0, ref.Kind == "Service", ref.Kind == "ConfigMap":
			out[ref] = v.message
		default:
			out[ref] = "Kong refused this route: " + v.message
		}
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

// version is what tells that an object changed: the generation of a
// Gateway API object, which its status writes leave alone (keying on the
// resourceVersion made every status write retry what Kong refused), else
// the resourceVersion; "" when the object is gone.
func version(snap *snapshot.Snapshot, ref translate.ObjectRef) string {
	obj := snap.Object(ref.Kind, ref.Namespace, ref.Name)
	switch {
	case obj == nil:
		return ""
	case ref.Kind != "Service" && ref.Kind != "ConfigMap":
		return "generation " + strconv.FormatInt(obj.GetGeneration(), 10)
	}
	return obj.GetResourceVersion()
}
