package translate_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
	"github.com/konglet/konglet/sync/translate"
)

// TestSecretRefs: the Secrets konglet reads are those that listeners of the
// bound Gateway and of its ListenerSets may use; never one that no
// ReferenceGrant allows.
func TestSecretRefs(t *testing.T) {
	s := loadSnapshot(t, snapshot.RouterExpressions, "testdata/secrets/input.yaml")
	var got []string
	for _, key := range translate.SecretRefs(s) {
		got = append(got, key.String())
	}
	want := []string{"certs/locked", "kong/big", "kong/pending", "kong/secure", "kong/slow", "team/cert"}
	if !slices.Equal(got, want) {
		t.Errorf("SecretRefs = %v, want %v", got, want)
	}
	// Another controller's Gateway uses nothing.
	s.ControllerName = "example.com/other"
	if refs := translate.SecretRefs(s); len(refs) != 0 {
		t.Errorf("SecretRefs of a Gateway konglet does not own = %v", refs)
	}
}

// TestSecretProblems: each Secret konglet could not read or keep is
// explained on the listener that names it, and the listener beside them
// keeps serving. Compared with testdata/secrets/problems.golden.yaml
// (-update rewrites it).
func TestSecretProblems(t *testing.T) {
	s := loadSnapshot(t, snapshot.RouterExpressions, "testdata/secrets/input.yaml")
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	s.SecretProblems = map[types.NamespacedName]snapshot.ReadProblem{
		key("certs", "locked"): {Forbidden: true},
		key("team", "cert"):    {Forbidden: true},
		key("kong", "big"):     {Size: 70000, Limit: 65536},
		key("kong", "slow"):    {Err: "the server was unable to return a response in the time allotted"},
		key("kong", "pending"): {},
	}
	res := translate.Translate(s, nil)

	resolved := func(set bool, name string) metav1.Condition {
		t.Helper()
		conditions := map[gwv1.SectionName][]metav1.Condition{}
		if set {
			for _, l := range res.Status.ListenerSets[key("team", "team")].Listeners {
				conditions[l.Name] = l.Conditions
			}
		} else {
			for _, l := range res.Status.Gateways[key("kong", "gw")].Listeners {
				conditions[l.Name] = l.Conditions
			}
		}
		for _, c := range conditions[gwv1.SectionName(name)] {
			if c.Type == string(gwv1.ListenerConditionResolvedRefs) {
				return c
			}
		}
		t.Fatalf("no ResolvedRefs on listener %s", name)
		return metav1.Condition{}
	}
	for _, c := range []struct {
		set       bool
		listener  string
		reason    gwv1.ListenerConditionReason
		inMessage []string
	}{
		{false, "secure", gwv1.ListenerReasonResolvedRefs, nil},
		{false, "forbidden", gwv1.ListenerReasonRefNotPermitted, []string{"certs/locked", "namespace certs", "Role", "install.md"}},
		{true, "team", gwv1.ListenerReasonRefNotPermitted, []string{"team/cert", "namespace team", "Role"}},
		{false, "oversized", gwv1.ListenerReasonInvalidCertificateRef, []string{"kong/big", "70000 bytes", "limit of 65536", "--max-secret-bytes"}},
		{false, "failed", gwv1.ListenerReasonInvalidCertificateRef, []string{"kong/slow", "time allotted"}},
		{false, "pending", gwv1.ListenerReasonInvalidCertificateRef, []string{"kong/pending", "not been read yet"}},
	} {
		got := resolved(c.set, c.listener)
		if got.Reason != string(c.reason) {
			t.Errorf("listener %s: ResolvedRefs reason %s, want %s (%s)", c.listener, got.Reason, c.reason, got.Message)
		}
		for _, part := range c.inMessage {
			if !strings.Contains(got.Message, part) {
				t.Errorf("listener %s: message %q does not say %q", c.listener, got.Message, part)
			}
		}
	}
	// Only the good listener's certificate reaches Kong.
	var snis []string
	for _, cert := range res.Config.Certificates {
		for _, sni := range cert.SNIs {
			snis = append(snis, sni.Name)
		}
	}
	if !slices.Equal(snis, []string{"secure.example.com"}) {
		t.Errorf("Kong serves certificates for %v, want only secure.example.com", snis)
	}

	got, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/secrets/problems.golden.yaml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./sync/translate -run TestSecretProblems -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), string(got)))
	}
}

// TestSecretProblemsThroughAMemo: a Secret that becomes unusable takes its
// listener's routes and certificate away; a Memo must not keep them.
func TestSecretProblemsThroughAMemo(t *testing.T) {
	s := loadSnapshot(t, snapshot.RouterExpressions, "testdata/secrets/input.yaml")
	var memo syncer
	if got := sameResult(t, "readable", &memo, s, nil); len(got.Config.Certificates) != 1 {
		t.Fatalf("%d certificates served, want the one of kong/secure", len(got.Config.Certificates))
	}
	refused := *s
	refused.SecretProblems = map[types.NamespacedName]snapshot.ReadProblem{{Namespace: "kong", Name: "secure"}: {Forbidden: true}}
	if got := sameResult(t, "refused", &memo, &refused, nil); len(got.Config.Certificates) != 0 || len(got.Config.Services) != 0 {
		t.Errorf("with kong/secure refused: %d certificates, %d services served, want none", len(got.Config.Certificates), len(got.Config.Services))
	}
	sameResult(t, "readable again", &memo, s, nil)
}
