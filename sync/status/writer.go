// Package status writes the statuses a translation wants onto the Gateway
// API objects: only when something changed, keeping lastTransitionTime of
// conditions that did not change and the status.parents entries of others.
package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwv1client "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// Writer writes statuses through the API server.
type Writer struct {
	client gwclient.Interface
	// bound are the Gateways this konglet serves: route parent entries that
	// point at them and carry our controllerName are ours to write or remove.
	bound []types.NamespacedName
	// leads tells whether this replica writes a Gateway's statuses (and its
	// routes' entries for it); only the elected leader of each does.
	leads func(types.NamespacedName) bool
	now   func() time.Time
	seen  *versions
	// setGateways maps every ListenerSet seen to its Gateway, deleted ones
	// included: routes' entries for a deleted set are still ours to remove.
	setsMu      sync.Mutex
	setGateways map[types.NamespacedName]types.NamespacedName
	setsVersion int // counts changes of setGateways
	settled     settledRoutes
}

// NewWriter returns a writer; now is the clock for lastTransitionTime; leads
// is nil when this replica writes every status (no election).
func NewWriter(client gwclient.Interface, bound []types.NamespacedName, leads func(types.NamespacedName) bool, now func() time.Time) *Writer {
	if leads == nil {
		leads = func(types.NamespacedName) bool { return true }
	}
	return &Writer{client: client, bound: bound, leads: leads, now: now, seen: &versions{},
		setGateways: map[types.NamespacedName]types.NamespacedName{}}
}

// listenerSetGateways records the snapshot's ListenerSets and returns a copy
// of every mapping known so far.
func (w *Writer) listenerSetGateways(snap *snapshot.Snapshot) map[types.NamespacedName]types.NamespacedName {
	w.setsMu.Lock()
	defer w.setsMu.Unlock()
	for _, ls := range snap.ListenerSets {
		key, gateway := types.NamespacedName{Namespace: ls.Namespace, Name: ls.Name}, listenerSetGateway(ls)
		if old, ok := w.setGateways[key]; !ok || old != gateway {
			w.setGateways[key] = gateway
			w.setsVersion++
		}
	}
	return maps.Clone(w.setGateways)
}

// ownership says what decides which routes' entries this writer owns: the
// Gateways it leads and the ListenerSets it knows.
func (w *Writer) ownership(controller string) string {
	w.setsMu.Lock()
	version := w.setsVersion
	w.setsMu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/", controller, version)
	for _, g := range w.bound {
		fmt.Fprintf(&b, "%t", w.leads(g))
	}
	return b.String()
}

// Leading tells whether this replica writes the statuses of any bound
// Gateway.
func (w *Writer) Leading() bool {
	for _, g := range w.bound {
		if w.leads(g) {
			return true
		}
	}
	return false
}

// Result counts what one Write did.
type Result struct {
	Writes int
}

// writeParallel is how many status writes run at once: each is one round
// trip to the API server, and a thousand routes attaching at once should
// not wait for each other's.
const writeParallel = 16

// task writes one object's status and reports whether it wrote.
type task func(context.Context) (bool, error)

// Write brings every object of the snapshot to the desired status. The
// snapshot's objects are the current state; they are copied, never changed.
func (w *Writer) Write(ctx context.Context, snap *snapshot.Snapshot, desired translate.Status) (Result, error) {
	sets := w.listenerSetGateways(snap)
	// Passes without the lead count too: another leader may write
	// meanwhile, so what this writer settled or kept from its own writes
	// is no base once it leads again.
	ownership := w.ownership(snap.ControllerName)
	w.seen.ownedBy(ownership)
	pass := w.settled.begin(ownership)
	if !w.Leading() {
		return Result{}, nil
	}
	now := metav1.NewTime(w.now().Truncate(time.Second))
	var tasks []task
	for name, want := range desired.GatewayClasses {
		if current := snap.GatewayClasses[name]; current != nil {
			tasks = append(tasks, func(ctx context.Context) (bool, error) { return w.writeGatewayClass(ctx, current, want, now) })
		}
	}
	for _, current := range snap.Gateways {
		key := types.NamespacedName{Namespace: current.Namespace, Name: current.Name}
		if want, ok := desired.Gateways[key]; ok && w.leads(key) {
			tasks = append(tasks, func(ctx context.Context) (bool, error) { return w.writeGateway(ctx, current, want, now) })
		}
	}
	for _, current := range snap.ListenerSets {
		want, ok := desired.ListenerSets[types.NamespacedName{Namespace: current.Namespace, Name: current.Name}]
		if ok && w.leads(listenerSetGateway(current)) {
			tasks = append(tasks, func(ctx context.Context) (bool, error) { return w.writeListenerSet(ctx, current, want, now) })
		}
	}
	owner := parentOwner{w: w, controller: snap.ControllerName, sets: sets, pass: pass}
	v1 := w.client.GatewayV1()
	for _, r := range snap.HTTPRoutes {
		if t := routeTask(owner, r, desired, now, v1.HTTPRoutes); t != nil {
			tasks = append(tasks, t)
		}
	}
	for _, r := range snap.GRPCRoutes {
		if t := routeTask(owner, r, desired, now, v1.GRPCRoutes); t != nil {
			tasks = append(tasks, t)
		}
	}
	for _, r := range snap.TLSRoutes {
		if t := routeTask(owner, r, desired, now, v1.TLSRoutes); t != nil {
			tasks = append(tasks, t)
		}
	}
	for _, r := range snap.TCPRoutes {
		if t := routeTask(owner, r, desired, now, v1.TCPRoutes); t != nil {
			tasks = append(tasks, t)
		}
	}
	for _, r := range snap.UDPRoutes {
		if t := routeTask(owner, r, desired, now, v1.UDPRoutes); t != nil {
			tasks = append(tasks, t)
		}
	}
	for _, p := range snap.BackendTLSPolicies {
		var want []gwv1.PolicyAncestorStatus
		for _, a := range desired.BackendTLSPolicies[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] {
			if owner.owns(p.Namespace, a.AncestorRef) {
				want = append(want, a)
			}
		}
		tasks = append(tasks, func(ctx context.Context) (bool, error) {
			return writePolicy(ctx, owner, p, want, now, v1.BackendTLSPolicies(p.Namespace))
		})
	}
	return run(ctx, tasks)
}

// routeTask writes a route's entries, or is nil when the route is settled:
// the object and its desired entries are those the last pass left right.
func routeTask[T any, P routeObject[T], C routeClient[P]](owner parentOwner, current P, desired translate.Status, now metav1.Time, client func(string) C) task {
	kind := reflect.TypeFor[T]().Name()
	ns, name := current.GetNamespace(), current.GetName()
	key := kind + "/" + ns + "/" + name
	entries := desired.Routes[translate.ObjectRef{Group: gwv1.GroupName, Kind: kind, Namespace: ns, Name: name}]
	if owner.w.settled.keep(owner.pass, key, current.GetResourceVersion(), entries) {
		return nil
	}
	return func(ctx context.Context) (bool, error) {
		wrote, err := writeRoute(ctx, owner, current, entries, now, client(ns))
		if err == nil {
			version, replaced := owner.w.seen.last(key, current.GetResourceVersion())
			owner.w.settled.set(owner.pass, key, version, replaced, entries)
		}
		return wrote, err
	}
}

// run runs the tasks, writeParallel at a time, and counts the writes.
func run(ctx context.Context, tasks []task) (Result, error) {
	var (
		mu   sync.Mutex
		res  Result
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan task)
	for range min(writeParallel, len(tasks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				wrote, err := t(ctx)
				mu.Lock()
				res.add(wrote)
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		next <- t
	}
	close(next)
	wg.Wait()
	return res, errors.Join(errs...)
}

// routeObject is what every route kind offers the writer.
type routeObject[T any] interface {
	*T
	metav1.Object
	runtime.Object
	DeepCopy() *T
}

// routeClient is the typed client of one route kind in one namespace.
type routeClient[P any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (P, error)
	UpdateStatus(ctx context.Context, obj P, opts metav1.UpdateOptions) (P, error)
}

// writeRoute replaces this replica's entries in a route's status.parents
// with the desired ones, keeping everyone else's.
func writeRoute[T any, P routeObject[T]](ctx context.Context, owner parentOwner, current P, entries []gwv1.RouteParentStatus,
	now metav1.Time, api routeClient[P]) (bool, error) {
	kind := reflect.TypeFor[T]().Name()
	ns, name := current.GetNamespace(), current.GetName()
	var want []gwv1.RouteParentStatus
	for _, p := range entries {
		if owner.owns(ns, p.ParentRef) {
			want = append(want, p)
		}
	}
	return update(ctx, owner.w.seen, current, false,
		func(ctx context.Context) (P, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		func(r P) (P, bool) {
			st := routeStatus(r)
			parents := owner.mergeParents(ns, st.Parents, want, now)
			if sameParents(parents, st.Parents) {
				return r, false
			}
			next := P(r.DeepCopy())
			routeStatus(next).Parents = parents
			return next, true
		},
		func(ctx context.Context, r P) (P, error) {
			written, err := api.UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return written, wrapErr(kind, ns, name, err)
		})
}

// routeStatus is the RouteStatus every route kind embeds.
func routeStatus(obj any) *gwv1.RouteStatus {
	switch r := obj.(type) {
	case *gwv1.HTTPRoute:
		return &r.Status.RouteStatus
	case *gwv1.GRPCRoute:
		return &r.Status.RouteStatus
	case *gwv1.TLSRoute:
		return &r.Status.RouteStatus
	case *gwv1.TCPRoute:
		return &r.Status.RouteStatus
	case *gwv1.UDPRoute:
		return &r.Status.RouteStatus
	}
	panic(fmt.Sprintf("routeStatus: %T is not a route", obj))
}

func (r *Result) add(wrote bool) {
	if wrote {
		r.Writes++
	}
}

// update retries a status write on conflict, reading the object again from
// the API server: another writer may have changed other parts of its status.
// The cached object is trusted only when it is the version this writer last
// wrote or read: else the cache may lag behind a write of ours (a status
// that went A, B and back to A would look unchanged) or another writer
// changed the status since, and the object is read afresh. keepWritten
// keeps the object last written, for the few objects written on most syncs
// (a Gateway's attachedRoutes follows every route created): while the cache
// still shows the version that write replaced, the object is that one.
func update[T any, P interface {
	*T
	metav1.Object
}](ctx context.Context, seen *versions, first P, keepWritten bool, get func(context.Context) (P, error), merge func(P) (P, bool), put func(context.Context, P) (P, error)) (bool, error) {
	key := reflect.TypeFor[T]().Name() + "/" + first.GetNamespace() + "/" + first.GetName()
	if written, ok := seen.replacing(key, first.GetResourceVersion()).(P); ok {
		first = written
	}
	// The cached object, when trusted, is merged before the retry loop: the
	// leader passes every route after each sync, and most are unchanged.
	var pending P
	if seen.is(key, first.GetResourceVersion()) {
		next, changed := merge(first)
		if !changed {
			return false, nil
		}
		pending = next
	}
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next := pending
		pending = nil
		if next == nil {
			current, err := get(ctx)
			if err != nil {
				return err
			}
			seen.set(key, current.GetResourceVersion(), "", nil)
			var changed bool
			if next, changed = merge(current); !changed {
				return nil
			}
		}
		written, err := put(ctx, next)
		if err != nil {
			return err
		}
		var kept any
		if keepWritten {
			kept = written
		}
		seen.set(key, written.GetResourceVersion(), next.GetResourceVersion(), kept)
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		seen.forget(key)
		return wrote, nil
	}
	return wrote, err
}

// versions are the resourceVersions of the objects as this writer last
// wrote or read them.
type versions struct {
	mu sync.Mutex
	rv map[string]version
	// ownership is what the writer owned when it kept the written objects.
	ownership string
}

// ownedBy forgets the objects kept from writes when what the writer owns
// changed (see Writer.ownership).
func (v *versions) ownedBy(ownership string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ownership == v.ownership {
		return
	}
	v.ownership = ownership
	for key, last := range v.rv {
		if last.written != nil {
			last.written = nil
			v.rv[key] = last
		}
	}
}

// version is an object's version as last written or read (rv) and, when
// written, the version the write replaced, which the cache shows until
// the watch brings the write, and the object written (see update).
type version struct {
	rv, replaced string
	written      any
}

// is tells whether rv is the version last written or read; an object never
// written counts as known (the cache is all there is to go by).
func (v *versions) is(key, rv string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	last, ok := v.rv[key]
	return !ok || last.rv == rv
}

// set records the version last read (replaced "") or written.
func (v *versions) set(key, rv, replaced string, written any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rv == nil {
		v.rv = map[string]version{}
	}
	v.rv[key] = version{rv, replaced, written}
}

// replacing is the object last written, if kept and cached is the version
// it replaced; else nil.
func (v *versions) replacing(key, cached string) any {
	v.mu.Lock()
	defer v.mu.Unlock()
	if last, ok := v.rv[key]; ok && last.replaced != "" && last.replaced == cached {
		return last.written
	}
	return nil
}

// last is the version last written or read, else cached, and the version
// that write replaced ("" if none).
func (v *versions) last(key, cached string) (rv, replaced string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if last, ok := v.rv[key]; ok {
		return last.rv, last.replaced
	}
	return cached, ""
}

// settledRoutes remember, per route, the version of the object and the
// desired entries that a pass wrote or found nothing to write for. The
// leader passes every route after each sync, and merging each status again
// cost milliseconds per thousand routes; an unchanged route's entries are
// the very slice the translation's Memo handed back before (kept here, so
// its memory cannot be reused by another). A change of what the writer owns
// (leadership, ListenerSets) forgets them all; a route not passed for
// forgetAfter passes is forgotten. Writes may run at once (passes over
// parts of the routes), hence the lock and no per-pass state.
type settledRoutes struct {
	mu        sync.Mutex
	ownership string
	pass      uint64
	routes    map[string]settledRoute
}

type settledRoute struct {
	version string
	// replaced is the version the write that settled it replaced ("" when
	// it was settled without a write): a cache that still shows it lags
	// behind that write, and the object holds what was written.
	replaced string
	entries  []gwv1.RouteParentStatus
	pass     uint64 // the last pass that found it settled or settled it
}

// forgetAfter is how many passes a settled route is kept without being
// passed (a deleted route's entry goes then).
const forgetAfter = 64

// begin starts a pass and returns its number.
func (s *settledRoutes) begin(ownership string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pass++
	if ownership != s.ownership || s.routes == nil {
		s.ownership, s.routes = ownership, map[string]settledRoute{}
	}
	if s.pass%forgetAfter == 0 {
		for key, r := range s.routes {
			if r.pass+forgetAfter < s.pass {
				delete(s.routes, key)
			}
		}
	}
	return s.pass
}

// keep tells whether the route is settled at this version with these
// entries, and keeps it so.
func (s *settledRoutes) keep(pass uint64, key, version string, entries []gwv1.RouteParentStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.routes[key]
	if !ok || r.version != version && (r.replaced == "" || r.replaced != version) || !sameSlice(r.entries, entries) {
		return false
	}
	r.pass = pass
	s.routes[key] = r
	return true
}

func (s *settledRoutes) set(pass uint64, key, version, replaced string, entries []gwv1.RouteParentStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routes != nil {
		s.routes[key] = settledRoute{version, replaced, entries, pass}
	}
}

// sameSlice tells whether a and b are the same slice, not equal ones.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (v *versions) forget(key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.rv, key)
}

func (w *Writer) writeGatewayClass(ctx context.Context, current *gwv1.GatewayClass, want gwv1.GatewayClassStatus, now metav1.Time) (bool, error) {
	api := w.client.GatewayV1().GatewayClasses()
	return update(ctx, w.seen, current, true,
		func(ctx context.Context) (*gwv1.GatewayClass, error) {
			return api.Get(ctx, current.Name, metav1.GetOptions{})
		},
		func(c *gwv1.GatewayClass) (*gwv1.GatewayClass, bool) {
			next := c.DeepCopy()
			next.Status.Conditions = mergeConditions(c.Status.Conditions, want.Conditions, now)
			next.Status.SupportedFeatures = want.SupportedFeatures
			return next, !equality.Semantic.DeepEqual(c.Status, next.Status)
		},
		func(ctx context.Context, c *gwv1.GatewayClass) (*gwv1.GatewayClass, error) {
			written, err := api.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return written, wrapErr("GatewayClass", c.Namespace, c.Name, err)
		})
}

func (w *Writer) writeGateway(ctx context.Context, current *gwv1.Gateway, want gwv1.GatewayStatus, now metav1.Time) (bool, error) {
	api := w.client.GatewayV1().Gateways(current.Namespace)
	return update(ctx, w.seen, current, true,
		func(ctx context.Context) (*gwv1.Gateway, error) {
			return api.Get(ctx, current.Name, metav1.GetOptions{})
		},
		func(g *gwv1.Gateway) (*gwv1.Gateway, bool) {
			next := g.DeepCopy()
			next.Status.Addresses = want.Addresses
			next.Status.AttachedListenerSets = want.AttachedListenerSets
			next.Status.Conditions = mergeConditions(g.Status.Conditions, want.Conditions, now)
			next.Status.Listeners = mergeListeners(g.Status.Listeners, want.Listeners, now,
				func(l *gwv1.ListenerStatus) (gwv1.SectionName, *[]metav1.Condition) { return l.Name, &l.Conditions })
			return next, !equality.Semantic.DeepEqual(g.Status, next.Status)
		},
		func(ctx context.Context, g *gwv1.Gateway) (*gwv1.Gateway, error) {
			written, err := api.UpdateStatus(ctx, g, metav1.UpdateOptions{})
			return written, wrapErr("Gateway", g.Namespace, g.Name, err)
		})
}

// listenerSetGateway is the Gateway a ListenerSet attaches to.
func listenerSetGateway(ls *gwv1.ListenerSet) types.NamespacedName {
	ns := ls.Namespace
	if ls.Spec.ParentRef.Namespace != nil {
		ns = string(*ls.Spec.ParentRef.Namespace)
	}
	return types.NamespacedName{Namespace: ns, Name: string(ls.Spec.ParentRef.Name)}
}

func (w *Writer) writeListenerSet(ctx context.Context, current *gwv1.ListenerSet, want gwv1.ListenerSetStatus, now metav1.Time) (bool, error) {
	api := w.client.GatewayV1().ListenerSets(current.Namespace)
	return update(ctx, w.seen, current, true,
		func(ctx context.Context) (*gwv1.ListenerSet, error) {
			return api.Get(ctx, current.Name, metav1.GetOptions{})
		},
		func(ls *gwv1.ListenerSet) (*gwv1.ListenerSet, bool) {
			next := ls.DeepCopy()
			next.Status.Conditions = mergeConditions(ls.Status.Conditions, want.Conditions, now)
			next.Status.Listeners = mergeListeners(ls.Status.Listeners, want.Listeners, now,
				func(l *gwv1.ListenerEntryStatus) (gwv1.SectionName, *[]metav1.Condition) {
					return l.Name, &l.Conditions
				})
			return next, !equality.Semantic.DeepEqual(ls.Status, next.Status)
		},
		func(ctx context.Context, ls *gwv1.ListenerSet) (*gwv1.ListenerSet, error) {
			written, err := api.UpdateStatus(ctx, ls, metav1.UpdateOptions{})
			return written, wrapErr("ListenerSet", ls.Namespace, ls.Name, err)
		})
}

// mergeListeners returns the wanted listener statuses with the transition
// times of the current ones kept (Gateway and ListenerSet listeners alike).
func mergeListeners[L any](current, want []L, now metav1.Time, fields func(*L) (gwv1.SectionName, *[]metav1.Condition)) []L {
	out := make([]L, len(want))
	for i := range want {
		out[i] = want[i]
		name, conds := fields(&out[i])
		var old []metav1.Condition
		for j := range current {
			if n, c := fields(&current[j]); n == name {
				old = *c
			}
		}
		*conds = mergeConditions(old, *conds, now)
	}
	return out
}

// mergeParents keeps the entries of other controllers (and ours for Gateways
// we do not serve) and replaces ours with the desired ones.
func (o parentOwner) mergeParents(routeNamespace string, current, want []gwv1.RouteParentStatus, now metav1.Time) []gwv1.RouteParentStatus {
	controller := o.controller
	out := make([]gwv1.RouteParentStatus, 0, len(current)+len(want))
	for _, p := range current {
		if string(p.ControllerName) != controller || !o.owns(routeNamespace, p.ParentRef) {
			out = append(out, p)
		}
	}
	for _, p := range want {
		var old []metav1.Condition
		for _, o := range current {
			if string(o.ControllerName) == controller && sameParentRef(o.ParentRef, p.ParentRef) {
				old = o.Conditions
				break
			}
		}
		p.Conditions = mergeConditions(old, p.Conditions, now)
		out = append(out, p)
	}
	return out
}

// parentOwner decides which status.parents entries this replica writes:
// ours, for parents (Gateways, or ListenerSets of them) that it leads.
type parentOwner struct {
	w          *Writer
	controller string
	sets       map[types.NamespacedName]types.NamespacedName // ListenerSet -> its Gateway
	pass       uint64                                        // the writer's pass over the routes
}

func (o parentOwner) owns(routeNamespace string, ref gwv1.ParentReference) bool {
	if ref.Group != nil && *ref.Group != gwv1.GroupName {
		return false
	}
	key := types.NamespacedName{Namespace: routeNamespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		key.Namespace = string(*ref.Namespace)
	}
	switch {
	case ref.Kind == nil || *ref.Kind == "Gateway":
	case *ref.Kind == "ListenerSet":
		gateway, ok := o.sets[key]
		if !ok {
			return false
		}
		key = gateway
	default:
		return false
	}
	return slices.Contains(o.w.bound, key) && o.w.leads(key)
}

// mergeConditions returns want with lastTransitionTime taken from the old
// condition of the same type when its status did not change, else now.
func mergeConditions(old, want []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, len(want))
	for i, c := range want {
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
			for _, o := range old {
				if o.Type == c.Type && o.Status == c.Status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
		}
		out[i] = c
	}
	return out
}

func wrapErr(kind, ns, name string, err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return err // retried or ignored by update
	}
	return fmt.Errorf("writing the status of %s %s/%s: %w", kind, ns, name, err)
}

// sameParents is equality.Semantic.DeepEqual for route status parents,
// without reflection: the leader compares every route's after each sync,
// and the reflective walk was most of that pass (TestSameParentsIsSemantic
// holds the two together).
func sameParents(a, b []gwv1.RouteParentStatus) bool {
	return slices.EqualFunc(a, b, func(x, y gwv1.RouteParentStatus) bool {
		return x.ControllerName == y.ControllerName && sameParentRef(x.ParentRef, y.ParentRef) && sameConditions(x.Conditions, y.Conditions)
	})
}

func sameParentRef(a, b gwv1.ParentReference) bool {
	return samePtr(a.Group, b.Group) && samePtr(a.Kind, b.Kind) && samePtr(a.Namespace, b.Namespace) && a.Name == b.Name &&
		samePtr(a.SectionName, b.SectionName) && samePtr(a.Port, b.Port)
}

func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.ObservedGeneration == y.ObservedGeneration &&
			x.LastTransitionTime.UTC() == y.LastTransitionTime.UTC() && x.Reason == y.Reason && x.Message == y.Message
	})
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// writePolicy replaces this replica's entries in a BackendTLSPolicy's
// status.ancestors with the desired ones, keeping everyone else's, the way
// writeRoute does for route parents.
func writePolicy(ctx context.Context, owner parentOwner, current *gwv1.BackendTLSPolicy, want []gwv1.PolicyAncestorStatus,
	now metav1.Time, api gwv1client.BackendTLSPolicyInterface) (bool, error) {
	ns, name := current.Namespace, current.Name
	return update(ctx, owner.w.seen, current, false,
		func(ctx context.Context) (*gwv1.BackendTLSPolicy, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		func(p *gwv1.BackendTLSPolicy) (*gwv1.BackendTLSPolicy, bool) {
			ancestors := owner.mergeAncestors(ns, p.Status.Ancestors, want, now)
			if sameAncestors(ancestors, p.Status.Ancestors) {
				return p, false
			}
			next := p.DeepCopy()
			next.Status.Ancestors = ancestors
			return next, true
		},
		func(ctx context.Context, p *gwv1.BackendTLSPolicy) (*gwv1.BackendTLSPolicy, error) {
			written, err := api.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return written, wrapErr("BackendTLSPolicy", ns, name, err)
		})
}

// mergeAncestors is mergeParents for policy ancestors.
func (o parentOwner) mergeAncestors(namespace string, current, want []gwv1.PolicyAncestorStatus, now metav1.Time) []gwv1.PolicyAncestorStatus {
	out := make([]gwv1.PolicyAncestorStatus, 0, len(current)+len(want))
	for _, a := range current {
		if string(a.ControllerName) != o.controller || !o.owns(namespace, a.AncestorRef) {
			out = append(out, a)
		}
	}
	for _, a := range want {
		var old []metav1.Condition
		for _, c := range current {
			if string(c.ControllerName) == o.controller && sameParentRef(c.AncestorRef, a.AncestorRef) {
				old = c.Conditions
				break
			}
		}
		a.Conditions = mergeConditions(old, a.Conditions, now)
		out = append(out, a)
	}
	return out
}

func sameAncestors(a, b []gwv1.PolicyAncestorStatus) bool {
	return slices.EqualFunc(a, b, func(x, y gwv1.PolicyAncestorStatus) bool {
		return x.ControllerName == y.ControllerName && sameParentRef(x.AncestorRef, y.AncestorRef) && sameConditions(x.Conditions, y.Conditions)
	})
}
