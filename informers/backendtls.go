package informers

import (
	"cmp"
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// backendTLS watches every BackendTLSPolicy and, one by one, the ConfigMaps
// their caCertificateRefs name in their own namespace (see
// translate.BackendTLSConfigMaps): konglet reads no other ConfigMap, so
// RBAC can grant it ConfigMaps by namespace or by name.
type backendTLS struct {
	policies   gwlisters.BackendTLSPolicyLister
	configMaps *configMapWatchers
}

// watchBackendTLS sets up the policy informer on the shared factory.
func (c *Cache) watchBackendTLS(kube kubernetes.Interface, all gwinformers.SharedInformerFactory) error {
	informer := all.Gateway().V1().BackendTLSPolicies()
	c.backendTLS = &backendTLS{policies: informer.Lister(), configMaps: &configMapWatchers{kube: kube, events: c.events(),
		watching: map[types.NamespacedName]*configMapWatcher{}}}
	return c.watch(informer.Informer())
}

// fill adds the policies and their ConfigMaps to a snapshot; it starts and
// stops ConfigMap watchers, so it runs from Snapshot only.
func (b *backendTLS) fill(ctx context.Context, s *snapshot.Snapshot) error {
	policies, err := b.policies.List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(policies, func(a, b *gwv1.BackendTLSPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	s.BackendTLSPolicies = policies
	b.configMaps.update(ctx, translate.BackendTLSConfigMaps(s))
	b.configMaps.fill(s)
	return nil
}

// configMapWatchers hold one informer per referenced ConfigMap, scoped to
// its namespace and name.
type configMapWatchers struct {
	kube     kubernetes.Interface
	events   cache.ResourceEventHandler
	mu       sync.Mutex
	watching map[types.NamespacedName]*configMapWatcher
}

type configMapWatcher struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// update makes the watched set the given one. A new ConfigMap is not
// waited for: its arrival triggers a sync, and until then the policy says
// the ConfigMap is not found (connections fail, never go unverified).
func (w *configMapWatchers) update(ctx context.Context, refs []types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := make(map[types.NamespacedName]bool, len(refs))
	for _, key := range refs {
		want[key] = true
		if w.watching[key] == nil {
			w.watching[key] = w.start(ctx, key)
		}
	}
	for key, cw := range w.watching {
		if !want[key] {
			cw.stop()
			delete(w.watching, key)
		}
	}
}

func (w *configMapWatchers) start(ctx context.Context, key types.NamespacedName) *configMapWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	api := w.kube.CoreV1().ConfigMaps(key.Namespace)
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return api.Watch(ctx, o)
		},
	}, w.kube), &corev1.ConfigMap{}, resyncNever, cache.Indexers{})
	_ = informer.SetTransform(trim) // cannot fail before the informer runs
	_, _ = informer.AddEventHandler(w.events)
	ctx, cancel := context.WithCancel(ctx)
	go informer.RunWithContext(ctx)
	return &configMapWatcher{informer: informer, stop: cancel}
}

// fill puts the watched ConfigMaps that exist into the snapshot.
func (w *configMapWatchers) fill(s *snapshot.Snapshot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, cw := range w.watching {
		if obj, ok, _ := cw.informer.GetStore().GetByKey(key.String()); ok {
			s.ConfigMaps[key] = obj.(*corev1.ConfigMap)
		}
	}
}
