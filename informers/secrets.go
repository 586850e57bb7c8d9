package informers

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/konglet/konglet/sync/snapshot"
)

// DefaultMaxSecretBytes is the default cap on a Secret's data. A TLS
// Secret holds a PEM chain and key: a leaf and two intermediates with a
// 4096-bit RSA key come to about 8 KiB, and long chains stay under 20 KiB,
// so 64 KiB refuses no real certificate while bounding what one Secret can
// make every konglet hold.
const DefaultMaxSecretBytes = 64 << 10

// DefaultMaxSecretWatches is the default cap on the Secrets watched at
// once. Each is a watch on the API server from every replica; listeners of
// ListenerSets, which tenants may write, could otherwise ask for any number.
const DefaultMaxSecretWatches = 256

// secretWait bounds how long a snapshot waits for the Secret watchers it
// starts to read their Secret or fail: a restart does not serve a listener
// without its certificate, and an unanswered watch never stalls syncs.
const secretWait = 5 * time.Second

// secretWatchers hold one informer per Secret that a listener may use (see
// translate.SecretRefs), each scoped to its namespace and to the Secret's
// name, so no other Secret is ever read, and so RBAC can grant konglet the
// Secrets of one namespace (or, by resourceNames, single Secrets).
type secretWatchers struct {
	kube  kubernetes.Interface
	limit int
	// max caps the watches (0: no cap); ownNamespaces are the bound
	// Gateways' namespaces, whose Secrets are watched first.
	max           int
	ownNamespaces map[string]bool
	events        cache.ResourceEventHandler
	notify        func()
	ctx           context.Context // set by Start: the watchers stop with it
	mu            sync.Mutex      // guards watching
	// watching is the current set, by Secret; unwatched are the Secrets
	// listeners may use beyond max.
	watching  map[types.NamespacedName]*secretWatcher
	unwatched []types.NamespacedName
}

// secretWatcher watches one Secret.
type secretWatcher struct {
	key      types.NamespacedName
	limit    int
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	failed   chan struct{} // closed at the first error
	notify   func()

	mu  sync.Mutex
	err error // the last list or watch error; nil once a request is let through
	// dropped is the version of the Secret whose data was over the limit.
	dropped struct {
		name, resourceVersion string
		size                  int
	}
}

// update makes the watched set the given one: watchers of Secrets no longer
// referenced stop (their data goes with them), new ones start. Then it waits,
// at most secretWait, until each new one has read its Secret or failed.
func (s *secretWatchers) update(refs []types.NamespacedName) {
	s.mu.Lock()
	refs, s.unwatched = s.choose(refs)
	want := make(map[types.NamespacedName]bool, len(refs))
	var started []*secretWatcher
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
	timeout := time.NewTimer(secretWait)
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
// reference never takes a watched Secret away), then in refs' order.
func (s *secretWatchers) choose(refs []types.NamespacedName) (watch, rest []types.NamespacedName) {
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

func (s *secretWatchers) start(key types.NamespacedName) *secretWatcher {
	w := &secretWatcher{key: key, limit: s.limit, failed: make(chan struct{}), notify: s.notify}
	// The type term keeps a Secret of another type out of memory even when
	// a listener names it.
	selector := fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", key.Name),
		fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))).String()
	secrets := s.kube.CoreV1().Secrets(key.Namespace)
	w.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list, err := secrets.List(ctx, o)
			if err == nil {
				w.setErr(nil)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			watcher, err := secrets.Watch(ctx, o)
			if err == nil {
				// The API server authorized it: a refusal is over.
				w.setErr(nil)
			}
			return watcher, err
		},
	}, s.kube), &corev1.Secret{}, resyncNever, cache.Indexers{})
	// Neither fails before the informer runs.
	_ = w.informer.SetTransform(w.transform)
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.setErr(err) })
	_, _ = w.informer.AddEventHandler(s.events)
	ctx, cancel := context.WithCancel(s.ctx)
	w.stop = cancel
	go w.informer.RunWithContext(ctx)
	return w
}

// setErr records the outcome of a request, and asks for a sync when it
// changes what the listener can be told.
func (w *secretWatcher) setErr(err error) {
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

// transform drops the data of a Secret over the limit as it arrives, so
// the limit also bounds what konglet holds, and trims it like every object.
func (w *secretWatcher) transform(obj any) (any, error) {
	if secret, ok := obj.(*corev1.Secret); ok {
		size := 0
		for k, v := range secret.Data {
			size += len(k) + len(v)
		}
		if size > w.limit {
			secret.Data = nil
			w.mu.Lock()
			w.dropped.name, w.dropped.resourceVersion, w.dropped.size = secret.Name, secret.ResourceVersion, size
			w.mu.Unlock()
		}
	}
	return trim(obj)
}

// read is the watched Secret (nil if it does not exist) or why it cannot be
// used. A Secret read before an error other than a refusal stays in use: an
// API server outage must not take certificates away.
func (w *secretWatcher) read() (*corev1.Secret, *snapshot.SecretProblem) {
	w.mu.Lock()
	err, dropped := w.err, w.dropped
	w.mu.Unlock()
	if apierrors.IsForbidden(err) {
		return nil, &snapshot.SecretProblem{Forbidden: true}
	}
	if !w.informer.HasSynced() {
		p := &snapshot.SecretProblem{}
		if err != nil {
			p.Err = err.Error()
		}
		return nil, p
	}
	obj, exists, _ := w.informer.GetStore().GetByKey(w.key.String())
	if !exists {
		return nil, nil
	}
	secret := obj.(*corev1.Secret)
	if secret.Name == dropped.name && secret.ResourceVersion == dropped.resourceVersion {
		return nil, &snapshot.SecretProblem{Size: dropped.size, Limit: w.limit}
	}
	return secret, nil
}

// fill puts the watched Secrets, or their problems, into the snapshot.
func (s *secretWatchers) fill(snap *snapshot.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.unwatched {
		snap.SecretProblems[key] = snapshot.SecretProblem{Unwatched: s.max}
	}
	for key, w := range s.watching {
		secret, problem := w.read()
		switch {
		case problem != nil:
			snap.SecretProblems[key] = *problem
		case secret != nil:
			snap.Secrets[key] = secret
		}
	}
}
