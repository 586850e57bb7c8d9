package kongdouble

import "strings"

// The routes schema (kong/db/schema/entities/routes.lua and
// routes_subschemas.lua) depends on the router flavor.

func routesRecord(flavor string) *record {
	snisElem := fld("", tString, customStr(validateWildcardHost))
	if flavor == "traditional" {
		snisElem = fld("", tString, customStr(validateSNI))
	}
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		utf8NameField("name"),
		fld("protocols", tSet, req(), lenMin(1), elems(protocolField("")), dflt([]any{"http", "https"}),
			func(f *field) { f.exclusive = protocolSubsets }),
		fld("https_redirect_status_code", tInteger, req(), dflt(426.0), oneOf(426.0, 301.0, 302.0, 307.0, 308.0)),
		fld("strip_path", tBoolean, req(), dflt(true)),
		fld("preserve_host", tBoolean, req(), dflt(false)),
		fld("request_buffering", tBoolean, req(), dflt(true)),
		fld("response_buffering", tBoolean, req(), dflt(true)),
		tagsField(),
		foreignField("service", "services"),
		fld("snis", tSet, elems(snisElem)),
		netsField("sources"),
		netsField("destinations"),
		methodsField(),
		hostsField(),
		routerPathsField(),
		headersField(),
		fld("regex_priority", tInteger, dflt(0.0)),
		fld("path_handling", tString, dflt("v0"), oneOf("v0", "v1")),
	)
	if flavor == "expressions" {
		r.add(fld("expression", tString))
		r.add(fld("priority", tInteger, req(), dflt(0.0), between(0, 70368744177663)))
	}
	tlsProtocols := []any{"grpcs", "https", "tls", "tls_passthrough"}
	r.checks = []*echeck{
		conditional("protocols", "snis", func(v any) bool {
			// if_match replaces the elements rule but keeps the set's own
			// validators (length, exclusive subsets).
			seq, ok := protocolSet(v)
			if !ok || exclusiveSubsets(protocolSubsets, v) != "" {
				return false
			}
			for _, p := range seq {
				if isOneOf(p, tlsProtocols) {
					return false
				}
			}
			return true
		}, func(v any) string {
			if v != nil && valueLen(v) != 0 {
				return "length must be 0"
			}
			return ""
		}, "'snis' can only be set when 'protocols' is 'grpcs', 'https', 'tls' or 'tls_passthrough'"),
	}
	if flavor != "traditional" {
		r.checks = append(r.checks, customCheck([]string{"id", "protocols", "snis", "sources", "destinations",
			"methods", "hosts", "paths", "headers", "expression", "regex_priority", "priority"}, true,
			func(in map[string]any) string { return validateRouteExpression(in) }))
	}
	r.subKey = "protocols"
	r.subs = routeSubschemas(flavor)
	return r
}

// protocolSet returns the protocols if they pass the protocols field's own
// set validators (Kong evaluates if_match with the field's definition).
func protocolSet(v any) ([]string, bool) {
	seq, ok := asSeq(v)
	if !ok || len(seq) == 0 {
		return nil, false
	}
	out := make([]string, 0, len(seq))
	for _, e := range seq {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func validProtocols(v any) ([]string, bool) {
	ps, ok := protocolSet(v)
	if !ok {
		return nil, false
	}
	for _, p := range ps {
		if !isOneOf(p, protocolNames) {
			return nil, false
		}
	}
	if exclusiveSubsets(protocolSubsets, v) != "" {
		return nil, false
	}
	return ps, true
}

func containsStr(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// condAtLeastOneOf is conditional_at_least_one_of on the protocols field.
func condAtLeastOneOf(ifMatch func([]string) bool, then []string, thenErr string, elseMatch func([]string) bool, elseThen []string, elseErr string) *echeck {
	sources := append([]string{"protocols"}, then...)
	sources = append(sources, elseThen...)
	return &echeck{sources: sources, missingOK: true, runIfAllNil: true, withInvalid: true,
		fn: func(in map[string]any, _ ltable) (bool, string) {
			if in["protocols"] == nil {
				return true, ""
			}
			ps, valid := validProtocols(in["protocols"])
			list, errFmt := then, thenErr
			switch {
			case valid && ifMatch(ps):
			case valid && elseMatch != nil && elseMatch(ps):
				list, errFmt = elseThen, elseErr
			default:
				return true, ""
			}
			for _, n := range list {
				if isNonEmpty(in[n]) {
					return true, ""
				}
			}
			if strings.Contains(errFmt, "%s") {
				return false, strings.Replace(errFmt, "%s", quotedList(list), 1)
			}
			return false, errFmt
		}}
}

func routeSubschemas(flavor string) map[string]*subschema {
	exprs := flavor == "expressions"
	withExpr := func(list ...string) []string {
		if exprs {
			return append(list, "expression")
		}
		return list
	}
	noField := func(base *field, err string) *field {
		f := *base
		f.eqNull, f.err = true, err
		return &f
	}
	allOf := func(set ...string) func([]string) bool {
		return func(ps []string) bool {
			for _, p := range ps {
				if !containsStr(set, p) {
					return false
				}
			}
			return true
		}
	}
	contains := func(p string) func([]string) bool {
		return func(ps []string) bool { return containsStr(ps, p) }
	}

	http := &subschema{fields: map[string]*field{}}
	if !exprs {
		http.fields["sources"] = noField(netsField("sources"), "cannot set 'sources' when 'protocols' is 'http' or 'https'")
		http.fields["destinations"] = noField(netsField("destinations"), "cannot set 'destinations' when 'protocols' is 'http' or 'https'")
	}
	http.checks = []*echeck{condAtLeastOneOf(
		contains("https"), withExpr("methods", "hosts", "headers", "paths", "snis"), "must set one of %s when 'protocols' is 'https'",
		contains("http"), withExpr("methods", "hosts", "headers", "paths"), "must set one of %s when 'protocols' is 'http'")}

	streamErr := "when 'protocols' is 'tcp', 'tls', 'tls_passthrough' or 'udp'"
	stream := &subschema{fields: map[string]*field{
		"methods": noField(methodsField(), "cannot set 'methods' "+streamErr),
		"hosts":   noField(hostsField(), "cannot set 'hosts' "+streamErr),
		"paths":   noField(routerPathsField(), "cannot set 'paths' "+streamErr),
		"headers": noField(headersField(), "cannot set 'headers' "+streamErr),
	}}
	stream.checks = []*echeck{
		condAtLeastOneOf(allOf("tcp", "tls", "udp"), withExpr("sources", "destinations", "snis"), "must set one of %s when 'protocols' is 'tcp', 'tls' or 'udp'", nil, nil, ""),
		condAtLeastOneOf(allOf("tls_passthrough"), withExpr("snis"), "must set snis when 'protocols' is 'tls_passthrough'", nil, nil, ""),
	}

	grpc := &subschema{fields: map[string]*field{
		"strip_path": fld("strip_path", tBoolean, req(), dflt(false), func(f *field) { f.ne = true },
			withErr("cannot set 'strip_path' when 'protocols' is 'grpc' or 'grpcs'")),
		"methods": noField(methodsField(), "cannot set 'methods' when 'protocols' is 'grpc' or 'grpcs'"),
	}}
	if !exprs {
		grpc.fields["sources"] = noField(netsField("sources"), "cannot set 'sources' when 'protocols' is 'grpc' or 'grpcs'")
		grpc.fields["destinations"] = noField(netsField("destinations"), "cannot set 'destinations' when 'protocols' is 'grpc' or 'grpcs'")
	}
	grpc.checks = []*echeck{condAtLeastOneOf(
		contains("grpcs"), withExpr("hosts", "headers", "paths", "snis"), "must set one of %s when 'protocols' is 'grpcs'",
		contains("grpc"), withExpr("hosts", "headers", "paths"), "must set one of %s when 'protocols' is 'grpc'")}

	return map[string]*subschema{
		"http": http, "https": http,
		"tcp": stream, "tls": stream, "udp": stream, "tls_passthrough": stream,
		"grpc": grpc, "grpcs": grpc,
	}
}
