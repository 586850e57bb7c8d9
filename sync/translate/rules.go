package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/konglet/konglet/sync/snapshot"
)

// ruleResult is one rule of a route after validation.
type ruleResult struct {
	index   int
	name    *gwv1.SectionName
	matches []gwv1.HTTPRouteMatch
	// backends are the usable ones; an empty list with a servable rule means
	// every request to the rule is answered 500.
	backends []backend
	// refProblems explain backendRefs that could not be used.
	refProblems []refProblem
	// dropped says why the rule cannot be served at all ("" when it can).
	dropped string
	// note says what of the rule Kong serves only approximately.
	note    string
	filters ruleFilters
}

type refProblem struct {
	reason  gwv1.RouteConditionReason
	message string
}

var (
	// The names Kong's expressions grammar accepts after http.headers. and
	// http.queries. (a header's '-' is written '_'). Kong lets nginx keep
	// underscores in header names, and http.headers.x_env reads an X_Env
	// header, else X-Env: Kong cannot tell the two apart, so a match on
	// either name is served and also matches the other spelling.
	headerNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	queryNamePattern  = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	methodPattern     = regexp.MustCompile(`^[A-Z]+$`)
)

// rules validates the route's rules and resolves their backends; read are
// the Services it looked up, with their EndpointSlices.
func (t *translator) rules(r route) (out []ruleResult, read []backendInput) {
	out = make([]ruleResult, 0, len(r.rules))
	for i, rule := range r.rules {
		res := ruleResult{index: i, name: rule.name}
		var msg string
		if res.filters, msg = t.collectFilters(rule); msg != "" {
			res.dropped = fmt.Sprintf("rule %s: %s", ruleLabel(i, rule.name), msg)
		}
		if rule.timeouts != nil && rule.timeouts.Request != nil && rule.timeouts.BackendRequest == nil {
			res.note = fmt.Sprintf("rule %s: timeouts.request is served as Kong's read and write timeouts of the backend, which limit each read and write, not the whole request", ruleLabel(i, rule.name))
		}
		matches := rule.matches
		if len(matches) == 0 {
			matches = []gwv1.HTTPRouteMatch{{}}
		}
		if r.stream() && i > 0 {
			// No match tells stream rules apart: the first one is served.
			res.dropped = fmt.Sprintf("rule %s: a %s is served by its first rule only", ruleLabel(i, rule.name), r.kind)
		}
		res.matches = make([]gwv1.HTTPRouteMatch, 0, len(matches))
		for mi, m := range matches {
			norm, err := t.normalizeMatch(m)
			if err != "" && res.dropped == "" {
				res.dropped = fmt.Sprintf("rule %s match %d: %s", ruleLabel(i, rule.name), mi, err)
			}
			res.matches = append(res.matches, norm)
		}
		for _, ref := range rule.backendRefs {
			key, problem := t.backendService(r.meta.Namespace, r.kind, ref.BackendRef)
			var b backend
			if problem == nil {
				var in backendInput
				read, in = t.noteRead(read, key)
				b, problem = t.resolveBackend(in, ref.BackendRef, r.meta.Namespace, r.kind)
			}
			if problem != nil {
				res.refProblems = append(res.refProblems, *problem)
				continue
			}
			if b.weight > 0 {
				if res.filters.perBackend && len(ref.Filters) > 0 {
					b.headers = ref.Filters[0].RequestHeaderModifier
				}
				res.backends = append(res.backends, b)
			}
		}
		checkRuleTLS(&res, ruleLabel(i, rule.name))
		out = append(out, res)
	}
	return out, read
}

// noteRead adds a Service lookup to read, once, and returns it: the
// backend is resolved from what the Memo compares (the snapshot's list of
// EndpointSlices, never modified in place).
func (t *translator) noteRead(read []backendInput, key types.NamespacedName) ([]backendInput, backendInput) {
	if i := slices.IndexFunc(read, func(b backendInput) bool { return b.key == key }); i >= 0 {
		return read, read[i]
	}
	in := backendInput{key: key, service: t.snap.Services[key], slices: t.snap.EndpointSlices[key]}
	return append(read, in), in
}

// defaultPathType and rootPath are a match's path when it has none; shared
// by every such match, never written through.
var (
	defaultPathType = gwv1.PathMatchPathPrefix
	rootPath        = "/"
)

// normalizeMatch fills defaults and checks that Kong can express the match.
func (t *translator) normalizeMatch(m gwv1.HTTPRouteMatch) (gwv1.HTTPRouteMatch, string) {
	// A complete path match is shared with the route, never written
	// through: most are, and a copy per match was an allocation.
	out := gwv1.HTTPRouteMatch{Method: m.Method, Path: m.Path}
	if m.Path == nil || m.Path.Type == nil || m.Path.Value == nil {
		path := gwv1.HTTPPathMatch{Type: &defaultPathType, Value: &rootPath}
		if m.Path != nil {
			path.Type = cmp.Or(m.Path.Type, path.Type)
			path.Value = cmp.Or(m.Path.Value, path.Value)
		}
		out.Path = &path
	}
	path := *out.Path
	switch *path.Type {
	case gwv1.PathMatchExact, gwv1.PathMatchPathPrefix:
		if !strings.HasPrefix(*path.Value, "/") || strings.Contains(*path.Value, "//") {
			return out, fmt.Sprintf("path %q must start with / and contain no //", *path.Value)
		}
	case gwv1.PathMatchRegularExpression:
		if _, err := regexp.Compile(*path.Value); err != nil {
			return out, fmt.Sprintf("path regular expression %q is not valid: %v", *path.Value, err)
		}
	default:
		return out, fmt.Sprintf("path match type %q is not supported", *path.Type)
	}
	if m.Method != nil && !methodPattern.MatchString(string(*m.Method)) {
		return out, fmt.Sprintf("method %q is not supported", *m.Method)
	}
	// Only the first of equivalent names counts (Gateway API): each one
	// seen is kept, or the match refused. The API allows 16 of each: no map.
	for _, h := range m.Headers {
		name := strings.ToLower(string(h.Name))
		if slices.ContainsFunc(out.Headers, func(o gwv1.HTTPHeaderMatch) bool { return string(o.Name) == name }) {
			continue
		}
		if !headerNamePattern.MatchString(name) || name == "host" {
			return out, fmt.Sprintf("header name %q cannot be matched by Kong", h.Name)
		}
		if msg := checkValueMatch(h.Type, h.Value, "header"); msg != "" {
			return out, msg
		}
		out.Headers = append(out.Headers, gwv1.HTTPHeaderMatch{Type: h.Type, Name: gwv1.HTTPHeaderName(name), Value: h.Value})
	}
	for _, q := range m.QueryParams {
		if t.snap.Kong.RouterFlavor != snapshot.RouterExpressions {
			return out, fmt.Sprintf("query parameter matches need Kong's expressions router (router_flavor is %s)", t.snap.Kong.RouterFlavor)
		}
		if slices.ContainsFunc(out.QueryParams, func(o gwv1.HTTPQueryParamMatch) bool { return o.Name == q.Name }) {
			continue
		}
		if !queryNamePattern.MatchString(string(q.Name)) {
			return out, fmt.Sprintf("query parameter name %q cannot be matched by Kong (letters, digits and _ only)", q.Name)
		}
		if msg := checkValueMatch((*gwv1.HeaderMatchType)(q.Type), q.Value, "query parameter"); msg != "" {
			return out, msg
		}
		out.QueryParams = append(out.QueryParams, q)
	}
	return out, ""
}

func checkValueMatch(typ *gwv1.HeaderMatchType, value, what string) string {
	if typ == nil || *typ == gwv1.HeaderMatchExact {
		return ""
	}
	if *typ != gwv1.HeaderMatchRegularExpression {
		return fmt.Sprintf("%s match type %q is not supported", what, *typ)
	}
	if _, err := regexp.Compile(value); err != nil {
		return fmt.Sprintf("%s regular expression %q is not valid: %v", what, value, err)
	}
	return ""
}

// rulesVerdict is the Accepted reason when no rule of the route can be served.
func rulesVerdict(rules []ruleResult) (reason, message string) {
	var msgs []string
	for _, r := range rules {
		if r.dropped == "" {
			return "", ""
		}
		msgs = append(msgs, r.dropped)
	}
	if len(rules) == 0 {
		return "", ""
	}
	return string(gwv1.RouteReasonUnsupportedValue), joinMessages(msgs)
}

// notes is the Accepted message of a served route: what its served rules
// get only approximately.
func notes(rules []ruleResult) string {
	var msgs []string
	for _, r := range rules {
		if r.dropped == "" && r.note != "" {
			msgs = append(msgs, r.note)
		}
	}
	return joinMessages(msgs)
}

func partiallyInvalid(rules []ruleResult, gen int64) *metav1.Condition {
	var msgs []string
	for _, r := range rules {
		if r.dropped != "" {
			msgs = append(msgs, r.dropped)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	c := condition(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue),
		"these rules are not served: "+joinMessages(msgs), gen)
	return &c
}

func resolvedRefsCondition(rules []ruleResult, gen int64) metav1.Condition {
	var reason gwv1.RouteConditionReason
	var msgs []string
	for _, r := range rules {
		for _, p := range r.refProblems {
			if reason == "" {
				reason = p.reason
			}
			msgs = append(msgs, fmt.Sprintf("rule %s: %s", ruleLabel(r.index, r.name), p.message))
		}
		if len(r.refProblems) > 0 && len(r.backends) > 0 {
			// Gateway API wants their share answered 500: Kong balances
			// over targets (hosts), and has no weighted local answer.
			msgs = append(msgs, fmt.Sprintf("rule %s: the usable backendRefs take the share of those that do not resolve (Kong cannot answer 500 for a share of requests)", ruleLabel(r.index, r.name)))
		}
	}
	if reason == "" {
		return condition(string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "", gen)
	}
	return condition(string(gwv1.RouteConditionResolvedRefs), false, string(reason), joinMessages(msgs), gen)
}

func joinMessages(msgs []string) string {
	return strings.Join(msgs, "; ")
}
