package informers

import (
	"cmp"
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// DefaultMaxConfigMapBytes is the default cap on the CA certificates of
// one ConfigMap (its ca.crt): a private CA bundle is a few certificates of
// 1 to 2 KiB each, so 64 KiB (some forty) refuses no real bundle while
// bounding what one ConfigMap can make every konglet hold and send to Kong.
const DefaultMaxConfigMapBytes = 64 << 10

// DefaultMaxConfigMapWatches is the default cap on the ConfigMaps watched
// at once: policies, which tenants write, name them.
const DefaultMaxConfigMapWatches = 256

// backendTLS watches every BackendTLSPolicy and, one by one, the ConfigMaps
// their caCertificateRefs name in their own namespace (see
// translate.BackendTLSConfigMaps): konglet reads no other ConfigMap, so
// RBAC can grant it ConfigMaps by namespace or by name.
type backendTLS struct {
	policies   gwlisters.BackendTLSPolicyLister
	configMaps *namedWatchers[*corev1.ConfigMap]
}

// watchBackendTLS sets up the policy informer on the shared factory.
func (c *Cache) watchBackendTLS(all gwinformers.SharedInformerFactory, configMaps *namedWatchers[*corev1.ConfigMap]) error {
	informer := all.Gateway().V1().BackendTLSPolicies()
	c.backendTLS = &backendTLS{policies: informer.Lister(), configMaps: configMaps}
	return c.watch(informer.Informer())
}

// policiesSorted lists the cached policies by namespace and name.
func (b *backendTLS) policiesSorted() ([]*gwv1.BackendTLSPolicy, error) {
	policies, err := b.policies.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(policies, func(a, b *gwv1.BackendTLSPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return policies, nil
}

// record watches the CA ConfigMaps the snapshot's policies name, and puts
// them in it; it starts and stops watchers, so only Snapshot calls it.
func (b *backendTLS) record(s *snapshot.Snapshot) {
	b.configMaps.update(translate.BackendTLSConfigMaps(s))
	b.configMaps.fill(s.ConfigMaps, s.ConfigMapProblems)
}

// configMapKind reads the ConfigMaps of CA certificates one by one.
func configMapKind(kube kubernetes.Interface) namedKind[*corev1.ConfigMap] {
	return namedKind[*corev1.ConfigMap]{
		client: kube,
		list: func(ctx context.Context, namespace string, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().ConfigMaps(namespace).List(ctx, o)
		},
		watch: func(ctx context.Context, namespace string, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
		},
		selector: func(name string) string { return fields.OneTermEqualSelector("metadata.name", name).String() },
		example:  &corev1.ConfigMap{},
		// Only ca.crt is read: the rest of a shared ConfigMap is not kept.
		keepData: func(cm *corev1.ConfigMap) int {
			ca, ok := cm.Data[translate.CACertKey]
			cm.Data, cm.BinaryData = nil, nil
			if ok {
				cm.Data = map[string]string{translate.CACertKey: ca}
			}
			return len(ca)
		},
		dropData: func(cm *corev1.ConfigMap) { cm.Data = nil },
	}
}
