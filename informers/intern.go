package informers

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// maxInterned bounds the values an interner keeps: the fields it is used
// on take few distinct values (namespaces, kinds, condition reasons), and
// a cluster that defeats that only loses the sharing. maxInternedLen keeps
// long strings (a condition message may take 32 KiB) out: the interner
// outlives the objects, and 16,384 long messages written by whoever may
// write a route's status would stay in memory for good.
const (
	maxInterned    = 1 << 14
	maxInternedLen = 256
)

// interner shares the values that recur across routes: JSON decoding
// gives every route its own copy of each string and of each pointer to
// one ("Gateway", "PathPrefix", the controller name, a condition's
// message...), tens of small allocations per route. Cached objects are
// never modified (the translation and the status writer copy), so they
// may point at one shared value. Transforms of several informers run at
// once, hence the lock.
type interner struct {
	mu   sync.Mutex
	strs map[string]string
	ptrs map[any]any // a value (its dynamic type included) -> the pointer shared
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, ptrs: map[any]any{}}
}

func (in *interner) str(s string) string {
	if len(s) > maxInternedLen {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.strs[s]; ok {
		return v
	}
	if len(in.strs) < maxInterned {
		in.strs[s] = s
	}
	return s
}

// internPtr returns the pointer shared for *p's value.
func internPtr[T comparable](in *interner, p *T) *T {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if q, ok := in.ptrs[*p]; ok {
		return q.(*T)
	}
	if len(in.ptrs) < maxInterned {
		in.ptrs[*p] = p
	}
	return p
}

// route interns a route's namespace, parentRefs and status in place.
func (in *interner) route(meta *metav1.ObjectMeta, spec *gwv1.CommonRouteSpec, st *gwv1.RouteStatus) {
	meta.Namespace = in.str(meta.Namespace)
	for i := range spec.ParentRefs {
		in.parentRef(&spec.ParentRefs[i])
	}
	for i := range st.Parents {
		p := &st.Parents[i]
		in.parentRef(&p.ParentRef)
		p.ControllerName = gwv1.GatewayController(in.str(string(p.ControllerName)))
		for j := range p.Conditions {
			c := &p.Conditions[j]
			c.Type, c.Status, c.Reason, c.Message = in.str(c.Type), metav1.ConditionStatus(in.str(string(c.Status))), in.str(c.Reason), in.str(c.Message)
		}
	}
}

func (in *interner) parentRef(r *gwv1.ParentReference) {
	r.Group, r.Kind, r.Namespace = internPtr(in, r.Group), internPtr(in, r.Kind), internPtr(in, r.Namespace)
	r.Name, r.SectionName, r.Port = gwv1.ObjectName(in.str(string(r.Name))), internPtr(in, r.SectionName), internPtr(in, r.Port)
}

func (in *interner) backendRef(r *gwv1.BackendRef) {
	r.Group, r.Kind, r.Namespace = internPtr(in, r.Group), internPtr(in, r.Kind), internPtr(in, r.Namespace)
	r.Port, r.Weight = internPtr(in, r.Port), internPtr(in, r.Weight)
}

// httpRoute interns what recurs in an HTTPRoute's rules too.
func (in *interner) httpRoute(r *gwv1.HTTPRoute) {
	in.route(&r.ObjectMeta, &r.Spec.CommonRouteSpec, &r.Status.RouteStatus)
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		for j := range rule.Matches {
			if p := rule.Matches[j].Path; p != nil {
				p.Type, p.Value = internPtr(in, p.Type), internPtr(in, p.Value)
			}
		}
		for j := range rule.BackendRefs {
			in.backendRef(&rule.BackendRefs[j].BackendRef)
		}
	}
}

// grpcRoute interns what recurs in a GRPCRoute's rules too.
func (in *interner) grpcRoute(r *gwv1.GRPCRoute) {
	in.route(&r.ObjectMeta, &r.Spec.CommonRouteSpec, &r.Status.RouteStatus)
	for i := range r.Spec.Rules {
		for j := range r.Spec.Rules[i].BackendRefs {
			in.backendRef(&r.Spec.Rules[i].BackendRefs[j].BackendRef)
		}
	}
}
