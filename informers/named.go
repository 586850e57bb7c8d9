package informers

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/konglet/konglet/sync/snapshot"
)

// namedWait bounds how long a snapshot waits for the watchers it starts to
// read their object or fail: a restart does not serve a listener without
// its certificate, nor a backend without its CA certificates, and an
// unanswered watch stalls syncs (snapshots take turns) no longer than that.
const namedWait = 5 * time.Second

// namedKind is what differs between the kinds konglet reads one object at
// a time: how to list and watch one namespace, what else the field
// selector requires, and which data of an object konglet reads.
type namedKind[T namedObject] struct {
	// client is passed to client-go, which asks it whether watch lists
	// are supported.
	client any
	list   func(ctx context.Context, namespace string, o metav1.ListOptions) (runtime.Object, error)
	watch  func(ctx context.Context, namespace string, o metav1.ListOptions) (watch.Interface, error)
	// selector is the field selector of the object of that name.
	selector func(name string) string
	example  T
	// keepData drops the data konglet never reads and tells the bytes of
	// the rest; dropData forgets those.
	keepData func(T) int
	dropData func(T)
}

type namedObject interface {
	metav1.Object
	runtime.Object
}

// namedWatchers hold one informer per object of one kind that konglet may
// use, each scoped to its namespace and name, so that no other object of
// the kind is ever read, and RBAC can grant konglet them by namespace (or
// by resourceNames, one by one). Each is a watch on the API server from
// every replica, and the names come from objects tenants may write, so the
// watches are capped, and so is the data one object may bring into memory.
type namedWatchers[T namedObject] struct {
	kind namedKind[T]
	// limit caps an object's data; max caps the watches (0: no cap).
	limit, max int
	// ownNamespaces are the bound Gateways' namespaces, whose objects are
	// watched first.
	ownNamespaces map[string]bool
	events        cache.ResourceEventHandler
	notify        func()
	ctx           context.Context // set by Cache.Start: the watchers stop with it
	mu            sync.Mutex      // guards watching and unwatched
	// watching is the current set, by name; unwatched are the names
	// beyond max.
	watching  map[types.NamespacedName]*namedWatcher[T]
	unwatched []types.NamespacedName
}

// newNamedWatchers are the watchers of one kind for a cache: their events
// wake it, and the bound Gateways' namespaces come first.
func newNamedWatchers[T namedObject](c *Cache, kind namedKind[T], limit, max int) *namedWatchers[T] {
	s := &namedWatchers[T]{kind: kind, limit: limit, max: max, ownNamespaces: map[string]bool{}, events: c.events(),
		notify: c.Trigger.Notify, watching: map[types.NamespacedName]*namedWatcher[T]{}}
	for _, g := range c.scope.Gateways {
		s.ownNamespaces[g.Namespace] = true
	}
	return s
}

// namedWatcher watches one object.
type namedWatcher[T namedObject] struct {
	key      types.NamespacedName
	limit    int
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	failed   chan struct{} // closed at the first error
	notify   func()
	// readEarly: a snapshot read the object before the first list
	// answered, and told its users it was not read yet.
	readEarly atomic.Bool
	keepData  func(T) int
	dropData  func(T)

	mu  sync.Mutex
	err error // the last list or watch error; nil once a request is let through
	// dropped is the version of the object whose data was over the limit.
	dropped struct {
		name, resourceVersion string
		size                  int
	}
}

// update makes the watched set the given one: watchers of objects no longer
// named stop (their data goes with them), new ones start. Then it waits,
// at most namedWait, until each new one has read its object or failed.
func (s *namedWatchers[T]) update(refs []types.NamespacedName) {
	s.mu.Lock()
	refs, s.unwatched = s.choose(refs)
	want := make(map[types.NamespacedName]bool, len(refs))
	var started []*namedWatcher[T]
	for _, key := range refs {
		want[key] = true
		if s.watching[key] == nil {
			w := s.start(key)
			s.watching[key] = w
			started = append(started, w)
		}
	}
	for key, w := range s.watching {
		if !want[key] {
			w.stop()
			delete(s.watching, key)
		}
	}
	s.mu.Unlock()
	if len(started) == 0 {
		return
	}
	timeout := time.NewTimer(namedWait)
	defer timeout.Stop()
	for _, w := range started {
		select {
		case <-w.informer.HasSyncedChecker().Done():
		case <-w.failed:
		case <-timeout.C:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// choose splits refs into those to watch, at most max, and the rest: the
// Gateways' own namespaces' first, then those watched already (a new
// reference never takes a watched object away), then in refs' order.
func (s *namedWatchers[T]) choose(refs []types.NamespacedName) (watch, rest []types.NamespacedName) {
	if s.max <= 0 || len(refs) <= s.max {
		return refs, nil
	}
	rank := func(key types.NamespacedName) int {
		switch {
		case s.ownNamespaces[key.Namespace]:
			return 0
		case s.watching[key] != nil:
			return 1
		}
		return 2
	}
	ordered := slices.Clone(refs)
	slices.SortStableFunc(ordered, func(a, b types.NamespacedName) int { return rank(a) - rank(b) })
	return ordered[:s.max], ordered[s.max:]
}

func (s *namedWatchers[T]) start(key types.NamespacedName) *namedWatcher[T] {
	k := s.kind
	w := &namedWatcher[T]{key: key, limit: s.limit, failed: make(chan struct{}), notify: s.notify, keepData: k.keepData, dropData: k.dropData}
	selector := k.selector(key.Name)
	w.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list, err := k.list(ctx, key.Namespace, o)
			if err == nil {
				w.setErr(nil)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			watcher, err := k.watch(ctx, key.Namespace, o)
			if err == nil {
				// The API server authorized it: a refusal is over.
				w.setErr(nil)
			}
			return watcher, err
		},
	}, k.client), k.example, resyncNever, cache.Indexers{})
	// Neither fails before the informer runs.
	_ = w.informer.SetTransform(w.transform)
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.setErr(err) })
	_, _ = w.informer.AddEventHandler(s.events)
	ctx, cancel := context.WithCancel(s.ctx)
	w.stop = cancel
	go w.informer.RunWithContext(ctx)
	// A first list that answers after a snapshot stopped waiting for it
	// (namedWait) and finds no object brings no event and no error: its
	// outcome would reach the object's users only with an unrelated sync.
	go func() {
		select {
		case <-w.informer.HasSyncedChecker().Done():
			if w.readEarly.Load() {
				w.notify()
			}
		case <-ctx.Done():
		}
	}()
	return w
}

// setErr records the outcome of a request, and asks for a sync when it
// changes what the object's users can be told.
func (w *namedWatcher[T]) setErr(err error) {
	w.mu.Lock()
	changed := (w.err == nil) != (err == nil) || err != nil && err.Error() != w.err.Error()
	w.err = err
	w.mu.Unlock()
	if err != nil {
		select {
		case <-w.failed:
		default:
			close(w.failed)
		}
	}
	if changed {
		w.notify()
	}
}

// transform drops the data of an object over the limit as it arrives, so
// the limit also bounds what konglet holds, and trims it like every object.
func (w *namedWatcher[T]) transform(obj any) (any, error) {
	if o, ok := obj.(T); ok {
		if size := w.keepData(o); size > w.limit {
			w.dropData(o)
			w.mu.Lock()
			w.dropped.name, w.dropped.resourceVersion, w.dropped.size = o.GetName(), o.GetResourceVersion(), size
			w.mu.Unlock()
		}
	}
	return trim(obj)
}

// read is the watched object (false if it does not exist) or why it cannot
// be used. An object read before an error other than a refusal stays in
// use: an API server outage must not take certificates away.
func (w *namedWatcher[T]) read() (T, bool, *snapshot.ReadProblem) {
	var none T
	w.mu.Lock()
	err, dropped := w.err, w.dropped
	w.mu.Unlock()
	if apierrors.IsForbidden(err) {
		return none, false, &snapshot.ReadProblem{Forbidden: true}
	}
	if !w.informer.HasSynced() {
		// Marked before the second look: either the watcher's goroutine
		// sees the mark once synced, or this read sees it synced.
		w.readEarly.Store(true)
		if !w.informer.HasSynced() {
			p := &snapshot.ReadProblem{}
			if err != nil {
				p.Err = err.Error()
			}
			return none, false, p
		}
	}
	obj, exists, _ := w.informer.GetStore().GetByKey(w.key.String())
	if !exists {
		return none, false, nil
	}
	o := obj.(T)
	if o.GetName() == dropped.name && o.GetResourceVersion() == dropped.resourceVersion {
		return none, false, &snapshot.ReadProblem{Size: dropped.size, Limit: w.limit}
	}
	return o, true, nil
}

// fill puts the watched objects, or their problems, into a snapshot's maps.
func (s *namedWatchers[T]) fill(objects map[types.NamespacedName]T, problems map[types.NamespacedName]snapshot.ReadProblem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.unwatched {
		problems[key] = snapshot.ReadProblem{Unwatched: s.max}
	}
	for key, w := range s.watching {
		obj, ok, problem := w.read()
		switch {
		case problem != nil:
			problems[key] = *problem
		case ok:
			objects[key] = obj
		}
	}
}
