package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/konglet/konglet/sync/snapshot"
)

// TestConfigMapWatchersReadOnlyWhatPoliciesName: konglet reads a ConfigMap
// only when a BackendTLSPolicy names it in its own namespace, by name; the
// others (another namespace's of the same name, unreferenced ones) are
// never listed or watched. It keeps only ca.crt, and not even that above
// --max-configmap-bytes.
func TestConfigMapWatchersReadOnlyWhatPoliciesName(t *testing.T) {
	cm := func(ns, name, ca string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
			Data: map[string]string{"ca.crt": ca, "other": "unread"}, BinaryData: map[string][]byte{"blob": []byte("unread")}}
	}
	kube := kubefake.NewClientset(cm("team-a", "ca", "x"), cm("team-a", "big", "0123456789A"), cm("team-a", "unused", "x"), cm("team-b", "ca", "x"))
	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p", Generation: 1},
		Spec: gwv1.BackendTLSPolicySpec{Validation: gwv1.BackendTLSPolicyValidation{Hostname: "a.example.com",
			CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}, {Kind: "ConfigMap", Name: "big"}, {Kind: "Secret", Name: "key"}}}}}
	gw := gwfake.NewClientset(policy)
	gw.PrependReactor("list", "gateways", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &gwv1.GatewayList{}, nil
	})
	gw.PrependWatchReactor("gateways", func(clienttesting.Action) (bool, watch.Interface, error) { return true, watch.NewRaceFreeFake(), nil })
	c, ctx := startedCache(t, kube, gw, Scope{ControllerName: snapshot.DefaultControllerName, Gateways: []types.NamespacedName{{Namespace: "gw", Name: "kong"}}, MaxConfigMapBytes: 10})
	// The watchers a snapshot starts are waited for (a restart must not
	// fail the backends until a later sync).
	s, err := c.Snapshot(snapshot.DefaultKong(snapshot.RouterExpressions))
	if err != nil {
		t.Fatal(err)
	}
	ca := s.ConfigMaps[types.NamespacedName{Namespace: "team-a", Name: "ca"}]
	if len(s.BackendTLSPolicies) != 1 || len(s.ConfigMaps) != 1 || ca == nil {
		t.Fatalf("policies %d, ConfigMaps %v; want the policy and team-a/ca only", len(s.BackendTLSPolicies), s.ConfigMaps)
	}
	if len(ca.Data) != 1 || ca.Data["ca.crt"] != "x" || ca.BinaryData != nil {
		t.Errorf("team-a/ca kept as %v, %v; want its ca.crt only", ca.Data, ca.BinaryData)
	}
	if p, want := s.ConfigMapProblems[types.NamespacedName{Namespace: "team-a", Name: "big"}], (snapshot.ReadProblem{Size: 11, Limit: 10}); p != want || len(s.ConfigMapProblems) != 1 {
		t.Errorf("ConfigMapProblems %+v, want team-a/big's %+v", s.ConfigMapProblems, want)
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource != "configmaps" {
			continue
		}
		var selector string
		switch a := a.(type) {
		case clienttesting.ListAction:
			selector = a.GetListRestrictions().Fields.String()
		case clienttesting.WatchAction:
			selector = a.GetWatchRestrictions().Fields.String()
		}
		if a.GetNamespace() != "team-a" || selector != "metadata.name=ca" && selector != "metadata.name=big" {
			t.Errorf("%s configmaps in %q with fieldSelector %q, want team-a and metadata.name=ca or big only", a.GetVerb(), a.GetNamespace(), selector)
		}
	}

	// Without the policy, the watcher stops and the copy goes.
	if err := gw.GatewayV1().BackendTLSPolicies("team-a").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if s, err = c.Snapshot(snapshot.DefaultKong(snapshot.RouterExpressions)); err != nil {
			t.Fatal(err)
		}
		if len(s.BackendTLSPolicies) == 0 {
			break
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("the deleted policy stayed: %v", err)
		}
	}
	if len(s.ConfigMaps) != 0 || len(c.backendTLS.configMaps.watching) != 0 {
		t.Errorf("ConfigMaps %v and %d watchers after the policy went, want none", s.ConfigMaps, len(c.backendTLS.configMaps.watching))
	}
}
