package informers

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
)

func tlsSecret(ns, name string, bytes int) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: make([]byte, bytes/2), corev1.TLSPrivateKeyKey: make([]byte, bytes/2)}}
}

func httpsListener(name string, port gwv1.PortNumber, refs ...gwv1.SecretObjectReference) gwv1.Listener {
	return gwv1.Listener{Name: gwv1.SectionName(name), Protocol: gwv1.HTTPSProtocolType, Port: port,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: refs}}
}

func secretRef(ns, name string) gwv1.SecretObjectReference {
	ref := gwv1.SecretObjectReference{Name: gwv1.ObjectName(name)}
	if ns != "" {
		ref.Namespace = (*gwv1.Namespace)(&ns)
	}
	return ref
}

// grant lets the Gateways of namespace gw use the Secrets of ns.
func grant(ns string) *gwv1.ReferenceGrant {
	return &gwv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateways"}, Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "gw"}},
		To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}}}}
}

// TestSecretWatchersReadOnlyWhatListenersUse: konglet reads a Secret only
// when a listener of its Gateway may use it (same namespace, or granted),
// each by name; a refused read, an oversized Secret and an unreferenced one
// end up where the translation can explain them, and a Secret no longer
// referenced is dropped.
func TestSecretWatchersReadOnlyWhatListenersUse(t *testing.T) {
	gateway := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "kong", Generation: 1}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "konglet",
		Listeners: []gwv1.Listener{
			httpsListener("own", 443, secretRef("", "cert")),
			httpsListener("big", 444, secretRef("", "big")),
			httpsListener("granted", 445, secretRef("shared", "cert")),
			httpsListener("forbidden", 446, secretRef("locked", "cert")),
			httpsListener("ungranted", 447, secretRef("tenant", "cert")),
		}}}
	kube := kubefake.NewClientset(tlsSecret("gw", "cert", 100), tlsSecret("gw", "unused", 100), tlsSecret("gw", "big", 2000),
		tlsSecret("shared", "cert", 100), tlsSecret("locked", "cert", 100), tlsSecret("tenant", "cert", 100))
	refuse := func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetNamespace() != "locked" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	}
	kube.PrependReactor("list", "secrets", refuse)
	kube.PrependWatchReactor("secrets", func(action clienttesting.Action) (bool, watch.Interface, error) {
		handled, _, err := refuse(action)
		return handled, nil, err
	})
	gw := gwfake.NewClientset(grant("shared"), grant("locked"),
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "konglet"}, Spec: gwv1.GatewayClassSpec{ControllerName: snapshot.DefaultControllerName}})
	// The fake's tracker does not take Gateways ("no matches for
	// gateway.networking.k8s.io/v1, Resource=gateways"): served by hand.
	gatewayEvents := watch.NewRaceFreeFake()
	gw.PrependReactor("list", "gateways", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &gwv1.GatewayList{Items: []gwv1.Gateway{*gateway}}, nil
	})
	gw.PrependWatchReactor("gateways", func(clienttesting.Action) (bool, watch.Interface, error) { return true, gatewayEvents, nil })
	c, ctx := startedCache(t, kube, gw, Scope{ControllerName: snapshot.DefaultControllerName, Gateways: []types.NamespacedName{{Namespace: "gw", Name: "kong"}}, MaxSecretBytes: 1000})
	s, err := c.Snapshot(snapshot.DefaultKong(snapshot.RouterExpressions))
	if err != nil {
		t.Fatal(err)
	}
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	if len(s.Secrets) != 2 || s.Secrets[key("gw", "cert")] == nil || s.Secrets[key("shared", "cert")] == nil {
		t.Errorf("Secrets = %v, want gw/cert and shared/cert", keys(s.Secrets))
	}
	want := map[types.NamespacedName]snapshot.ReadProblem{
		key("gw", "big"):      {Size: 2000 + len(corev1.TLSCertKey) + len(corev1.TLSPrivateKeyKey), Limit: 1000},
		key("locked", "cert"): {Forbidden: true},
	}
	if len(s.SecretProblems) != len(want) {
		t.Errorf("SecretProblems = %+v, want %+v", s.SecretProblems, want)
	}
	for k, p := range want {
		if s.SecretProblems[k] != p {
			t.Errorf("SecretProblems[%s] = %+v, want %+v", k, s.SecretProblems[k], p)
		}
	}
	// The oversized Secret's data left memory as it arrived.
	obj, _, _ := c.secrets.watching[key("gw", "big")].informer.GetStore().GetByKey("gw/big")
	if obj == nil || obj.(*corev1.Secret).Data != nil {
		t.Errorf("the oversized Secret's data is kept: %v", obj)
	}
	// Each read names its Secret; nothing else in any namespace is read,
	// nothing in the namespace that granted nothing.
	for _, a := range kube.Actions() {
		if a.GetResource().Resource != "secrets" {
			continue
		}
		var selector string
		switch a := a.(type) {
		case clienttesting.ListAction:
			selector = a.GetListRestrictions().Fields.String()
		case clienttesting.WatchAction:
			selector = a.GetWatchRestrictions().Fields.String()
		default:
			t.Errorf("unexpected request on secrets: %s", a.GetVerb())
			continue
		}
		if a.GetNamespace() == "tenant" || !strings.Contains(selector, "metadata.name=") || !strings.Contains(selector, "type=kubernetes.io/tls") {
			t.Errorf("%s secrets in %q with fieldSelector %q", a.GetVerb(), a.GetNamespace(), selector)
		}
		if strings.Contains(selector, "metadata.name=unused") {
			t.Errorf("the unreferenced Secret gw/unused was read")
		}
	}

	// Without the listener, its Secret's watcher stops and its copy goes.
	gateway = gateway.DeepCopy()
	gateway.Spec.Listeners = gateway.Spec.Listeners[1:]
	gateway.Generation = 2
	gateway.ResourceVersion = "2"
	gatewayEvents.Modify(gateway)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, err = c.Snapshot(snapshot.DefaultKong(snapshot.RouterExpressions)); err != nil {
			t.Fatal(err)
		}
		if s.Secrets[key("gw", "cert")] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gw/cert still read after its listener went: %v", keys(s.Secrets))
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.secrets.watching[key("gw", "cert")] != nil || len(c.secrets.watching) != 3 {
		t.Errorf("watching %d Secrets after the listener went, want 3 (big, shared, locked)", len(c.secrets.watching))
	}
}

func keys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	var out []types.NamespacedName
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSecretWatcherErrors: a refusal is reported even for a Secret read
// earlier (the permission was withdrawn), another error is not (an outage
// keeps certificates), and a request let through clears the refusal.
func TestSecretWatcherErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	notified := 0
	set := &namedWatchers[*corev1.Secret]{kind: secretKind(kubefake.NewClientset(tlsSecret("gw", "cert", 100))), limit: 1000, ctx: ctx,
		events: cacheHandlerNop{}, notify: func() { notified++ }, watching: map[types.NamespacedName]*namedWatcher[*corev1.Secret]{}}
	key := types.NamespacedName{Namespace: "gw", Name: "cert"}
	set.update([]types.NamespacedName{key})
	w := set.watching[key]
	if secret, ok, p := w.read(); !ok || p != nil {
		t.Fatalf("read = %v, %+v; want the Secret", secret, p)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "cert", nil)
	w.setErr(forbidden)
	w.setErr(forbidden)
	if secret, ok, p := w.read(); ok || p == nil || !p.Forbidden {
		t.Errorf("after a refusal: read = %v, %+v; want Forbidden", secret, p)
	}
	if notified != 1 {
		t.Errorf("notified %d times for one refusal repeated, want 1", notified)
	}
	w.setErr(apierrors.NewServiceUnavailable("down"))
	if secret, ok, p := w.read(); !ok || p != nil {
		t.Errorf("during an outage: read = %v, %+v; want the Secret read before", secret, p)
	}
	w.setErr(nil)
	if notified != 3 {
		t.Errorf("notified %d times for three changes, want 3", notified)
	}
}

// TestALateFirstListWakesASync: a Secret a snapshot read before its
// watcher's first list answered was told "not read yet"; a list that then
// finds none (no event, no error) still wakes a sync, so that its users
// are told it does not exist.
func TestALateFirstListWakesASync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := kubefake.NewClientset()
	answer := make(chan struct{})
	client.PrependReactor("list", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case <-answer:
		case <-ctx.Done(): // the test failed first
		}
		return false, nil, nil
	})
	var notified atomic.Int32
	set := &namedWatchers[*corev1.Secret]{kind: secretKind(client), limit: 1000, ctx: ctx,
		events: cacheHandlerNop{}, notify: func() { notified.Add(1) }, watching: map[types.NamespacedName]*namedWatcher[*corev1.Secret]{}}
	w := set.start(types.NamespacedName{Namespace: "gw", Name: "missing"})
	if _, ok, p := w.read(); ok || p == nil {
		t.Fatalf("read before the first list answered: %v, %+v; want a problem", ok, p)
	}
	close(answer)
	for notified.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the first list answered, and no sync was asked for")
		case <-time.After(time.Millisecond):
		}
	}
	if _, ok, p := w.read(); ok || p != nil {
		t.Errorf("after the list: %v, %+v; want no object and no problem", ok, p)
	}
}

// cacheHandlerNop ignores events.
type cacheHandlerNop struct{}

func (cacheHandlerNop) OnAdd(any, bool)   {}
func (cacheHandlerNop) OnUpdate(any, any) {}
func (cacheHandlerNop) OnDelete(any)      {}

// TestSecretWatchesAreCapped: beyond --max-secret-watches, the Gateways'
// own namespaces' Secrets are watched first, then those watched already
// (a new reference takes no watch away), then in order; the rest are told
// to the listeners that name them.
func TestSecretWatchesAreCapped(t *testing.T) {
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	s := &namedWatchers[*corev1.Secret]{max: 3, ownNamespaces: map[string]bool{"gw": true},
		watching: map[types.NamespacedName]*namedWatcher[*corev1.Secret]{key("team-b", "z"): {}}}
	refs := []types.NamespacedName{key("aaa", "first"), key("gw", "own"), key("team-a", "x"), key("team-b", "z"), key("gw", "own2")}
	watch, rest := s.choose(refs)
	if want := []types.NamespacedName{key("gw", "own"), key("gw", "own2"), key("team-b", "z")}; !slices.Equal(watch, want) {
		t.Errorf("watched %v, want %v", watch, want)
	}
	if want := []types.NamespacedName{key("aaa", "first"), key("team-a", "x")}; !slices.Equal(rest, want) {
		t.Errorf("not watched %v, want %v", rest, want)
	}
	if w, r := s.choose(refs[:3]); len(w) != 3 || r != nil {
		t.Errorf("within the cap: watched %v, not watched %v", w, r)
	}
	s.unwatched, s.watching = rest, nil
	snap := &snapshot.Snapshot{SecretProblems: map[types.NamespacedName]snapshot.ReadProblem{}}
	s.fill(snap.Secrets, snap.SecretProblems)
	if p := snap.SecretProblems[key("team-a", "x")]; p.Unwatched != 3 {
		t.Errorf("an unwatched Secret's problem is %+v", p)
	}
}
