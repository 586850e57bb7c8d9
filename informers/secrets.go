package informers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
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

// secretKind reads the TLS Secrets that listeners may use (see
// translate.SecretRefs) one by one (DESIGN decision 8).
func secretKind(kube kubernetes.Interface) namedKind[*corev1.Secret] {
	return namedKind[*corev1.Secret]{
		client: kube,
		list: func(ctx context.Context, namespace string, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Secrets(namespace).List(ctx, o)
		},
		watch: func(ctx context.Context, namespace string, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Secrets(namespace).Watch(ctx, o)
		},
		// The type term keeps a Secret of another type out of memory even
		// when a listener names it.
		selector: func(name string) string {
			return fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", name),
				fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))).String()
		},
		example: &corev1.Secret{},
		// A listener reads all of a TLS Secret's data.
		keepData: func(s *corev1.Secret) int {
			size := 0
			for k, v := range s.Data {
				size += len(k) + len(v)
			}
			return size
		},
		dropData: func(s *corev1.Secret) { s.Data = nil },
	}
}
