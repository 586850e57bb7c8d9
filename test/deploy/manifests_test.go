package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// rbacSet is every object of deploy/rbac/*.yaml, typed.
type rbacSet struct {
	ServiceAccounts     []*corev1.ServiceAccount
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
}

// splitYAML splits a multi-document YAML file on its "---" lines.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if strings.TrimRight(string(line), " \r\n") == "---" {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

// loadRBAC decodes deploy/rbac/*.yaml. An unknown kind is an error: the
// test must apply every object.
func loadRBAC() (*rbacSet, error) {
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "rbac", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no deploy/rbac/*.yaml (%v)", err)
	}
	s := &rbacSet{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range splitYAML(b) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s document %d: %w", f, i, err)
			}
			if tm.Kind == "" {
				continue // comments only
			}
			var obj any
			switch tm.Kind {
			case "ServiceAccount":
				o := &corev1.ServiceAccount{}
				s.ServiceAccounts, obj = append(s.ServiceAccounts, o), o
			case "ClusterRole":
				o := &rbacv1.ClusterRole{}
				s.ClusterRoles, obj = append(s.ClusterRoles, o), o
			case "ClusterRoleBinding":
				o := &rbacv1.ClusterRoleBinding{}
				s.ClusterRoleBindings, obj = append(s.ClusterRoleBindings, o), o
			case "Role":
				o := &rbacv1.Role{}
				s.Roles, obj = append(s.Roles, o), o
			case "RoleBinding":
				o := &rbacv1.RoleBinding{}
				s.RoleBindings, obj = append(s.RoleBindings, o), o
			default:
				return nil, fmt.Errorf("%s: unexpected kind %s", f, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				return nil, fmt.Errorf("%s document %d (%s): %w", f, i, tm.Kind, err)
			}
		}
	}
	return s, nil
}

// copy is a deep copy.
func (s *rbacSet) copy() *rbacSet {
	out := &rbacSet{}
	for _, o := range s.ServiceAccounts {
		out.ServiceAccounts = append(out.ServiceAccounts, o.DeepCopy())
	}
	for _, o := range s.ClusterRoles {
		out.ClusterRoles = append(out.ClusterRoles, o.DeepCopy())
	}
	for _, o := range s.ClusterRoleBindings {
		out.ClusterRoleBindings = append(out.ClusterRoleBindings, o.DeepCopy())
	}
	for _, o := range s.Roles {
		out.Roles = append(out.Roles, o.DeepCopy())
	}
	for _, o := range s.RoleBindings {
		out.RoleBindings = append(out.RoleBindings, o.DeepCopy())
	}
	return out
}

// ruleRef names one rule of one (Cluster)Role.
type ruleRef struct {
	Kind, Namespace, Name string
	Index                 int
}

// rules lists every rule of every role, in file order.
func (s *rbacSet) rules() []ruleRef {
	var out []ruleRef
	for _, r := range s.ClusterRoles {
		for i := range r.Rules {
			out = append(out, ruleRef{"ClusterRole", "", r.Name, i})
		}
	}
	for _, r := range s.Roles {
		for i := range r.Rules {
			out = append(out, ruleRef{"Role", r.Namespace, r.Name, i})
		}
	}
	return out
}

func (s *rbacSet) rule(ref ruleRef) rbacv1.PolicyRule {
	for _, r := range s.ClusterRoles {
		if ref.Kind == "ClusterRole" && r.Name == ref.Name {
			return r.Rules[ref.Index]
		}
	}
	for _, r := range s.Roles {
		if ref.Kind == "Role" && r.Namespace == ref.Namespace && r.Name == ref.Name {
			return r.Rules[ref.Index]
		}
	}
	panic(fmt.Sprintf("no rule %+v", ref))
}

// describe says which rule it is, for failure messages.
func (s *rbacSet) describe(ref ruleRef) string {
	r := s.rule(ref)
	where := ref.Kind + " " + ref.Name
	if ref.Namespace != "" {
		where = ref.Kind + " " + ref.Namespace + "/" + ref.Name
	}
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		groups[i] = g
		if g == "" {
			groups[i] = `""`
		}
	}
	names := ""
	if len(r.ResourceNames) > 0 {
		names = " resourceNames=" + strings.Join(r.ResourceNames, ",")
	}
	return fmt.Sprintf("%s rule %d (apiGroups=%s resources=%s%s verbs=%s)", where, ref.Index,
		strings.Join(groups, ","), strings.Join(r.Resources, ","), names, strings.Join(r.Verbs, ","))
}

// without returns a copy without one rule.
func (s *rbacSet) without(ref ruleRef) *rbacSet {
	out := s.copy()
	for _, r := range out.ClusterRoles {
		if ref.Kind == "ClusterRole" && r.Name == ref.Name {
			r.Rules = slices.Delete(r.Rules, ref.Index, ref.Index+1)
		}
	}
	for _, r := range out.Roles {
		if ref.Kind == "Role" && r.Namespace == ref.Namespace && r.Name == ref.Name {
			r.Rules = slices.Delete(r.Rules, ref.Index, ref.Index+1)
		}
	}
	return out
}

// relocated moves the set to other namespaces (ns maps old to new) and
// suffixes the names of cluster-scoped objects, so that several copies live
// side by side without granting each other anything. Names inside
// namespaces (and resourceNames) are kept: they are what is tested.
func (s *rbacSet) relocated(ns map[string]string, suffix string) *rbacSet {
	out := s.copy()
	mapNS := func(n string) string {
		if m, ok := ns[n]; ok {
			return m
		}
		return n
	}
	subjects := func(subs []rbacv1.Subject) {
		for i := range subs {
			if subs[i].Kind == rbacv1.ServiceAccountKind {
				subs[i].Namespace = mapNS(subs[i].Namespace)
			}
		}
	}
	for _, o := range out.ServiceAccounts {
		o.Namespace = mapNS(o.Namespace)
	}
	for _, o := range out.ClusterRoles {
		o.Name += suffix
	}
	for _, o := range out.ClusterRoleBindings {
		o.Name += suffix
		o.RoleRef.Name += suffix
		subjects(o.Subjects)
	}
	for _, o := range out.Roles {
		o.Namespace = mapNS(o.Namespace)
	}
	for _, o := range out.RoleBindings {
		o.Namespace = mapNS(o.Namespace)
		if o.RoleRef.Kind == "ClusterRole" {
			o.RoleRef.Name += suffix
		}
		subjects(o.Subjects)
	}
	return out
}

// namespaces are the namespaces the set's objects live in.
func (s *rbacSet) namespaces() []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, o := range s.ServiceAccounts {
		add(o.Namespace)
	}
	for _, o := range s.Roles {
		add(o.Namespace)
	}
	for _, o := range s.RoleBindings {
		add(o.Namespace)
	}
	return out
}

// layout is what the manifests say about where konglet runs.
type layout struct {
	ServiceAccount types.NamespacedName
	PodNamespace   string               // the Role that lets konglet patch pods/status
	Gateway        types.NamespacedName // the Role that grants one Gateway by name
	Lease          string               // the Lease that Role grants by name
}

// layoutOf reads the layout from the manifests.
func layoutOf(s *rbacSet) (layout, error) {
	var l layout
	if len(s.ServiceAccounts) != 1 {
		return l, fmt.Errorf("want one ServiceAccount in deploy/rbac, found %d", len(s.ServiceAccounts))
	}
	l.ServiceAccount = types.NamespacedName{Namespace: s.ServiceAccounts[0].Namespace, Name: s.ServiceAccounts[0].Name}
	for _, r := range s.Roles {
		for _, rule := range r.Rules {
			switch {
			case slices.Contains(rule.Resources, "pods/status"):
				l.PodNamespace = r.Namespace
			case slices.Contains(rule.Resources, "gateways") && len(rule.ResourceNames) > 0:
				l.Gateway = types.NamespacedName{Namespace: r.Namespace, Name: rule.ResourceNames[0]}
			case slices.Contains(rule.Resources, "leases") && len(rule.ResourceNames) > 0:
				l.Lease = rule.ResourceNames[0]
			}
		}
	}
	switch {
	case l.PodNamespace == "":
		return l, fmt.Errorf("no Role grants pods/status: cannot tell the Kong Pods' namespace")
	case l.Gateway.Name == "":
		return l, fmt.Errorf("no Role grants a Gateway by name")
	case l.Lease != "konglet-"+l.Gateway.Name:
		return l, fmt.Errorf("the Role grants the Lease %q but konglet elects with konglet-%s", l.Lease, l.Gateway.Name)
	case l.ServiceAccount.Namespace != l.PodNamespace:
		return l, fmt.Errorf("the ServiceAccount is in %s but the Pod Role in %s: a Pod runs as an account of its own namespace",
			l.ServiceAccount.Namespace, l.PodNamespace)
	}
	return l, nil
}

func (l layout) relocated(ns map[string]string) layout {
	m := func(n string) string {
		if v, ok := ns[n]; ok {
			return v
		}
		return n
	}
	l.ServiceAccount.Namespace = m(l.ServiceAccount.Namespace)
	l.PodNamespace = m(l.PodNamespace)
	l.Gateway.Namespace = m(l.Gateway.Namespace)
	return l
}

// apply creates every object of the set (the namespaces must exist).
func (s *rbacSet) apply(ctx context.Context) error {
	kube := env.Kube
	ok := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	for _, o := range s.ServiceAccounts {
		if _, err := kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); ok(err) != nil {
			return err
		}
	}
	for _, o := range s.ClusterRoles {
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); ok(err) != nil {
			return err
		}
	}
	for _, o := range s.ClusterRoleBindings {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{}); ok(err) != nil {
			return err
		}
	}
	for _, o := range s.Roles {
		if _, err := kube.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); ok(err) != nil {
			return err
		}
	}
	for _, o := range s.RoleBindings {
		if _, err := kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); ok(err) != nil {
			return err
		}
	}
	return nil
}

// deleteClusterScoped removes the set's ClusterRoles and bindings (the
// namespaced objects stay with their namespaces: envtest has no namespace
// controller to delete them).
func (s *rbacSet) deleteClusterScoped(ctx context.Context) {
	for _, o := range s.ClusterRoleBindings {
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
	}
	for _, o := range s.ClusterRoles {
		_ = env.Kube.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
	}
}

// effective is nil once the API server's authorizer grants the account one
// request of each rule of the set (RBAC takes effect asynchronously).
func (s *rbacSet) effective(ctx context.Context, sa types.NamespacedName) error {
	user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}
	check := func(ns string, rule rbacv1.PolicyRule) error {
		resource, sub, _ := strings.Cut(rule.Resources[0], "/")
		attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: rule.Verbs[0], Group: rule.APIGroups[0],
			Resource: resource, Subresource: sub}
		if len(rule.ResourceNames) > 0 {
			attrs.Name = rule.ResourceNames[0]
		}
		sar, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("%s may not %s %s/%s in %q yet", user, attrs.Verb, attrs.Group, rule.Resources[0], ns)
		}
		return nil
	}
	for _, r := range s.ClusterRoles {
		for _, rule := range r.Rules {
			if err := check("", rule); err != nil {
				return err
			}
		}
	}
	for _, r := range s.Roles {
		for _, rule := range r.Rules {
			if err := check(r.Namespace, rule); err != nil {
				return err
			}
		}
	}
	return nil
}
