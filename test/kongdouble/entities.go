package kongdouble

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"regexp"
	"strings"
	"time"
)

// Kong 3.9's core entity schemas (kong/db/schema/entities/*.lua) for the
// entities the double accepts in a declarative configuration.

var protocolNames = []any{"grpc", "grpcs", "http", "https", "tcp", "tls", "tls_passthrough", "udp"}
var httpProtocols = []any{"grpc", "grpcs", "http", "https"}

// protocolSubsets are the route protocol groups that cannot be mixed.
var protocolSubsets = [][]string{{"http", "https"}, {"tcp", "tls", "udp"}, {"tls_passthrough"}, {"grpc", "grpcs"}}

// foreignDef describes one foreign key of an entity.
type foreignDef struct {
	field, ref string
	required   bool
	cascade    bool // on_delete = "cascade": used to scope non-unique keys
}

type entityDef struct {
	endpointKey    string
	endpointUnique bool
	cacheKey       []string
	foreign        []foreignDef
}

// entityOrder is the topological order the declarative loader walks.
var entityOrder = []string{"consumers", "certificates", "ca_certificates", "services", "routes", "snis", "upstreams", "targets", "plugins"}

var entityDefs = map[string]*entityDef{
	"consumers":       {endpointKey: "username", endpointUnique: true},
	"certificates":    {},
	"ca_certificates": {},
	"services": {endpointKey: "name", endpointUnique: true,
		foreign: []foreignDef{{field: "client_certificate", ref: "certificates"}}},
	"routes": {endpointKey: "name", endpointUnique: true,
		foreign: []foreignDef{{field: "service", ref: "services"}}},
	"snis": {endpointKey: "name", endpointUnique: true,
		foreign: []foreignDef{{field: "certificate", ref: "certificates", required: true}}},
	"upstreams": {endpointKey: "name", endpointUnique: true,
		foreign: []foreignDef{{field: "client_certificate", ref: "certificates"}}},
	"targets": {endpointKey: "target", cacheKey: []string{"upstream", "target"},
		foreign: []foreignDef{{field: "upstream", ref: "upstreams", required: true, cascade: true}}},
	"plugins": {endpointKey: "instance_name", endpointUnique: true, cacheKey: []string{"name", "route", "service", "consumer"},
		foreign: []foreignDef{
			{field: "route", ref: "routes", cascade: true},
			{field: "service", ref: "services", cascade: true},
			{field: "consumer", ref: "consumers", cascade: true},
		}},
}

// ---- typedefs ----

func opt(f *field, opts []fopt) *field {
	for _, o := range opts {
		o(f)
	}
	return f
}

func uuidField(name string) *field { return fld(name, tString, func(f *field) { f.uuid = true }) }
func tsField(name string) *field   { return fld(name, tInteger, func(f *field) { f.timestamp = true }) }
func tsMsField(name string) *field { return fld(name, tNumber, func(f *field) { f.timestamp = true }) }

func utf8NameField(name string) *field {
	return fld(name, tString, unique(), customStr(validateUTF8Name))
}

func tagsField() *field {
	return fld("tags", tSet, elems(fld("", tString, req(), customStr(validateTag))))
}

func protocolField(name string, opts ...fopt) *field {
	return opt(fld(name, tString, oneOf(protocolNames...)), opts)
}

func protocolsField(values []any) *field {
	return fld("protocols", tSet, req(), dflt(append([]any(nil), httpProtocols...)),
		elems(fld("", tString, oneOf(values...))))
}

func hostField(name string, opts ...fopt) *field {
	return opt(fld(name, tString, customStr(validateHost)), opts)
}

func portField(name string, opts ...fopt) *field {
	return opt(fld(name, tInteger, between(0, 65535)), opts)
}

func pathField(name string, opts ...fopt) *field {
	f := fld(name, tString, matchNone(`//`, "must not have empty segments"), customStr(func(s string) string {
		msg, _ := validatePath(s)
		return msg
	}))
	f.startsWith = "/"
	return opt(f, opts)
}

func headerNameField(name string, opts ...fopt) *field {
	return opt(fld(name, tString, customStr(validateHeaderName)), opts)
}

func foreignField(name, ref string, opts ...fopt) *field {
	return opt(fld(name, tForeign, func(f *field) { f.ref = ref }), opts)
}

func anyField() *field { return fld("", tAny) }

func ipOrCIDRField(name string) *field {
	return fld(name, tString, customStr(func(s string) string {
		if isValidIPOrCIDR(s) {
			return ""
		}
		return "invalid ip or cidr range: '" + s + "'"
	}))
}

func netsField(name string) *field {
	return fld(name, tSet, elems(fld("", tRecord, recOf(func() *record {
		r := newRecord(ipOrCIDRField("ip"), portField("port"))
		r.checks = []*echeck{atLeastOneOf("ip", "port")}
		return r
	}()))))
}

func hostsField() *field {
	return fld("hosts", tArray, elems(fld("", tString,
		matchAll(`^[^*]*\*?[^*]*$`, "invalid wildcard: must have at most one wildcard"),
		matchAnyOf("invalid wildcard: must be placed at leftmost or rightmost label", `^\*\.`, `\.\*$`, `^[^*]*$`),
		customStr(validateHostWithWildcards))))
}

func methodsField() *field {
	return fld("methods", tSet, elems(fld("", tString, matchRe(`^[A-Z]+$`))))
}

func routerPathsField() *field {
	return fld("paths", tArray, elems(fld("", tString,
		matchNone(`//`, "must not have empty segments"),
		matchAnyOf("should start with: / (fixed path) or ~/ (regex path)", `^/`, `^~/`),
		customStr(func(p string) string { return validateRouterPath(p) }))))
}

// validateRouterPath is validate_path_with_regexes.
func validateRouterPath(p string) string {
	if msg, code := validatePath(p); code == "percent" {
		return msg
	}
	if !strings.HasPrefix(p, "~") {
		if n := normalizePath(p); n != p {
			return "non-normalized path, consider use '" + n + "' instead"
		}
		return ""
	}
	re := p[1:]
	if msg := pcreCompileError(re); msg != "" {
		return "invalid regex: '" + re + "' (PCRE returned: " + msg + ")"
	}
	return ""
}

// pcreOnly matches constructs PCRE accepts but Go's RE2 syntax does not, so
// that they are not refused here (the ATC validation may refuse them later,
// as Kong's Rust regex engine does not support them either).
var pcreOnly = regexp.MustCompile(`\(\?[=!>]|\(\?<[=!]|\\[1-9]|\\[gk][<{'0-9]|\(\?R\)|[*+?}][+]`)

// pcreCompileError approximates a PCRE compilation check with Go's regexp.
func pcreCompileError(re string) string {
	if _, err := regexp.Compile(re); err != nil {
		if pcreOnly.MatchString(re) {
			return ""
		}
		return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	return ""
}

func headersField() *field {
	return fld("headers", tMap,
		func(f *field) {
			f.keys = headerNameField("", matchNone(`^[Hh][Oo][Ss][Tt]$`, "cannot contain 'host' header, which must be specified in the 'hosts' attribute"))
			f.values = fld("", tArray, elems(fld("", tString)))
		})
}

func timeoutField(name string) *field {
	return fld(name, tInteger, between(1, 2147483646), dflt(60000.0))
}

// ---- services ----

func servicesRecord() *record {
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		utf8NameField("name"),
		fld("retries", tInteger, dflt(5.0), between(0, 32767)),
		protocolField("protocol", req(), dflt("http")),
		hostField("host", req()),
		portField("port", req(), dflt(80.0)),
		pathField("path"),
		timeoutField("connect_timeout"), timeoutField("write_timeout"), timeoutField("read_timeout"),
		tagsField(),
		foreignField("client_certificate", "certificates"),
		fld("tls_verify", tBoolean),
		fld("tls_verify_depth", tInteger, between(0, 64)),
		fld("ca_certificates", tArray, elems(uuidField(""))),
		fld("enabled", tBoolean, req(), dflt(true)),
	)
	notTLS := func(v any) bool {
		s, ok := v.(string)
		return ok && isOneOf(s, protocolNames) && s != "https" && s != "tls"
	}
	r.checks = []*echeck{
		conditional("protocol", "path", func(v any) bool {
			s, _ := v.(string)
			return isOneOf(s, []any{"tcp", "tls", "udp", "grpc", "grpcs"})
		}, mustBeNull, ""),
		conditional("protocol", "client_certificate", notTLS, mustBeNull, ""),
		conditional("protocol", "tls_verify", notTLS, mustBeNull, ""),
		conditional("protocol", "tls_verify_depth", notTLS, mustBeNull, ""),
		conditional("protocol", "ca_certificates", notTLS, mustBeNull, ""),
	}
	r.shorthand = serviceURLShorthand
	return r
}

var reURL = regexp.MustCompile(`^(?:([A-Za-z][A-Za-z0-9+\-.]*):)?(?://([^/?#]*))?([^?#]*)`)

// serviceURLShorthand expands services' `url` into protocol/host/port/path,
// like the shorthand_fields of services.lua.
func serviceURLShorthand(m map[string]any) ltable {
	raw, present := m["url"]
	if !present {
		return nil
	}
	s, ok := raw.(string)
	if !ok {
		return ltable{"url": "expected a string"}
	}
	delete(m, "url")
	parts := reURL.FindStringSubmatch(s)
	scheme, authority, path := parts[1], parts[2], parts[3]
	host, port := authority, ""
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = host[at+1:]
	}
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		host, port = host[:i], host[i+1:]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	protocol := scheme
	if protocol == "" {
		switch port {
		case "443":
			protocol = "https"
		default:
			protocol = "http"
		}
	}
	m["protocol"] = protocol
	if host != "" {
		m["host"] = host
	} else {
		m["host"] = nil
	}
	switch {
	case port != "":
		if n, ok := parseDecimal(port); ok {
			m["port"] = float64(n)
		} else {
			m["port"] = port
		}
	case protocol == "https":
		m["port"] = 443.0
	default:
		m["port"] = 80.0
	}
	if path != "" {
		m["path"] = path
	} else {
		m["path"] = nil
	}
	return nil
}

func isOneOf(s string, set []any) bool {
	for _, v := range set {
		if v == s {
			return true
		}
	}
	return false
}

// ---- upstreams and targets ----

func validateUpstreamName(name string) string {
	h, err := normalizeIP(name)
	switch {
	case err != "":
		return "Invalid name ('" + name + "'); must be a valid hostname"
	case h.typ != "name":
		return "Invalid name ('" + name + "'); no ip addresses allowed"
	case h.hasPort:
		return "Invalid name ('" + name + "'); no port allowed"
	}
	return ""
}

var reHTTPTokenForbidden = regexp.MustCompile(`[\x00-\x1f\x7f\x80-\xff \t()<>@,;:\\"/?={}\[\]]`)

func validateHTTPToken(s string) string {
	if reHTTPTokenForbidden.MatchString(s) {
		return "contains one or more invalid characters. ASCII control characters (0-31;127), space, tab and the characters ()<>@,;:\\\"/?={}[] are not allowed."
	}
	return ""
}

var hashOnValues = []any{"none", "consumer", "ip", "header", "cookie", "path", "query_arg", "uri_capture"}

func healthchecksRecord() *record {
	statuses := func(def ...float64) *field {
		d := make([]any, len(def))
		for i, v := range def {
			d[i] = v
		}
		return fld("http_statuses", tArray, dflt(d), elems(fld("", tInteger, between(100, 999))))
	}
	counter := func(name string) *field { return fld(name, tInteger, dflt(0.0), between(0, 255)) }
	seconds := func(name string, def float64) *field { return fld(name, tNumber, dflt(def), between(0, 65535)) }
	typ := func() *field {
		return fld("type", tString, dflt("http"), oneOf("tcp", "http", "https", "grpc", "grpcs"))
	}
	// Each level defaults to its expanded defaults, as gen_fields does.
	rec := func(name string, fields ...*field) *field {
		r := newRecord(fields...)
		def, _ := processAuto(r, map[string]any{})
		return fld(name, tRecord, dflt(def), recOf(r))
	}
	active := rec("active",
		typ(),
		seconds("timeout", 1),
		fld("concurrency", tInteger, dflt(10.0), between(1, 2147483648)),
		pathField("http_path", dflt("/")),
		fld("https_sni", tString, customStr(validateSNI)),
		fld("https_verify_certificate", tBoolean, dflt(true)),
		fld("headers", tMap, func(f *field) {
			f.keys = headerNameField("")
			f.values = fld("", tArray, elems(fld("", tString)))
		}),
		rec("healthy", seconds("interval", 0), statuses(200, 302), counter("successes")),
		rec("unhealthy", seconds("interval", 0), statuses(429, 404, 500, 501, 502, 503, 504, 505),
			counter("tcp_failures"), counter("timeouts"), counter("http_failures")),
	)
	passive := rec("passive",
		typ(),
		rec("healthy", statuses(200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308), counter("successes")),
		rec("unhealthy", statuses(429, 500, 503), counter("tcp_failures"), counter("timeouts"), counter("http_failures")),
	)
	return newRecord(active, passive, fld("threshold", tNumber, dflt(0.0), between(0, 100)))
}

func expandedDefault(r *record) fopt {
	def, _ := processAuto(r, map[string]any{})
	return dflt(def)
}

func upstreamsRecord() *record {
	hc := healthchecksRecord()
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		fld("name", tString, req(), unique(), customStr(validateUpstreamName)),
		fld("algorithm", tString, dflt("round-robin"), oneOf("consistent-hashing", "least-connections", "round-robin", "latency")),
		fld("hash_on", tString, dflt("none"), oneOf(hashOnValues...)),
		fld("hash_fallback", tString, dflt("none"), oneOf(hashOnValues...)),
		headerNameField("hash_on_header"),
		headerNameField("hash_fallback_header"),
		fld("hash_on_cookie", tString, customStr(validateHTTPToken)),
		pathField("hash_on_cookie_path", dflt("/")),
		fld("hash_on_query_arg", tString),
		fld("hash_fallback_query_arg", tString),
		fld("hash_on_uri_capture", tString),
		fld("hash_fallback_uri_capture", tString),
		fld("slots", tInteger, dflt(10000.0), between(10, 65536)),
		fld("healthchecks", tRecord, recOf(hc), expandedDefault(hc)),
		tagsField(),
		hostField("host_header"),
		foreignField("client_certificate", "certificates"),
		fld("use_srv_name", tBoolean, dflt(false)),
	)
	is := func(want string) func(any) bool { return func(v any) bool { return v == want } }
	required := func(v any) string {
		if v == nil {
			return "required field missing"
		}
		return ""
	}
	fallbackOneOf := func(values ...any) func(any) string {
		return func(v any) string {
			if !isOneOf(luaString(v), values) {
				return "expected one of: " + joinLua(values)
			}
			return ""
		}
	}
	r.checks = []*echeck{
		conditional("hash_on", "hash_on_header", is("header"), required, ""),
		conditional("hash_fallback", "hash_fallback_header", is("header"), required, ""),
		conditional("hash_on", "hash_on_cookie", is("cookie"), required, ""),
		conditional("hash_fallback", "hash_on_cookie", is("cookie"), required, ""),
		conditional("hash_on", "hash_fallback", is("none"), fallbackOneOf("none"), ""),
		conditional("hash_on", "hash_fallback", is("cookie"), fallbackOneOf("none"), ""),
		conditional("hash_on", "hash_fallback", is("consumer"), fallbackOneOf("none", "ip", "header", "cookie", "path", "query_arg", "uri_capture"), ""),
		conditional("hash_on", "hash_fallback", is("ip"), fallbackOneOf("none", "consumer", "header", "cookie", "path", "query_arg", "uri_capture"), ""),
		conditional("hash_on", "hash_fallback", is("path"), fallbackOneOf("none", "consumer", "ip", "header", "cookie", "query_arg", "uri_capture"), ""),
		conditional("hash_on", "hash_on_query_arg", is("query_arg"), required, ""),
		conditional("hash_fallback", "hash_fallback_query_arg", is("query_arg"), required, ""),
		conditional("hash_on", "hash_on_uri_capture", is("uri_capture"), required, ""),
		conditional("hash_fallback", "hash_fallback_uri_capture", is("uri_capture"), required, ""),
		{sources: []string{"hash_on_header", "hash_fallback_header"}, withInvalid: true,
			fn: func(in map[string]any, _ ltable) (bool, string) {
				a, b := in["hash_on_header"], in["hash_fallback_header"]
				if isNonEmpty(a) && isNonEmpty(b) && a == b {
					return false, "values of these fields must be distinct: 'hash_on_header', 'hash_fallback_header'"
				}
				return true, ""
			}},
	}
	return r
}

func validateTarget(t string) string {
	if _, err := normalizeIP(t); err != "" {
		return "Invalid target ('" + t + "'); not a valid hostname or ip address"
	}
	return ""
}

func targetsRecord() *record {
	return newRecord(
		uuidField("id"), tsMsField("created_at"), tsMsField("updated_at"),
		foreignField("upstream", "upstreams", req()),
		fld("target", tString, req(), customStr(validateTarget)),
		fld("weight", tInteger, dflt(100.0), between(0, 65535)),
		tagsField(),
	)
}

// ---- certificates and snis ----

func parseCertPEM(s string) (*x509.Certificate, string) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, "x509.new: PEM_read_bio_X509: no start line"
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, "x509.new: " + err.Error()
	}
	return c, ""
}

func validateCertificate(s string) string {
	if _, msg := parseCertPEM(s); msg != "" {
		return "invalid certificate: " + msg
	}
	return ""
}

func validateKey(s string) string {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return "invalid key: pkey.new:load_key: no start line"
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return ""
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return ""
	}
	if _, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return ""
	}
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		return ""
	}
	return "invalid key: pkey.new:load_key: unsupported key format"
}

func certKeyMismatch(cert, key any, msg string) string {
	c, ok1 := cert.(string)
	k, ok2 := key.(string)
	if !ok1 || !ok2 {
		return ""
	}
	if _, err := tls.X509KeyPair([]byte(c), []byte(k)); err != nil {
		return msg
	}
	return ""
}

func certificatesRecord() *record {
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		fld("cert", tString, req(), customStr(validateCertificate)),
		fld("key", tString, req(), customStr(validateKey)),
		fld("cert_alt", tString, customStr(validateCertificate)),
		fld("key_alt", tString, customStr(validateKey)),
		tagsField(),
	)
	r.checks = []*echeck{
		mutuallyRequired("cert_alt", "key_alt"),
		customCheck([]string{"cert", "key"}, false, func(in map[string]any) string {
			return certKeyMismatch(in["cert"], in["key"], "certificate does not match key")
		}),
		customCheck([]string{"cert_alt", "key_alt"}, false, func(in map[string]any) string {
			return certKeyMismatch(in["cert_alt"], in["key_alt"], "alternative certificate does not match key")
		}),
		customCheck([]string{"cert", "cert_alt"}, false, func(in map[string]any) string {
			a, ok1 := in["cert"].(string)
			b, ok2 := in["cert_alt"].(string)
			if !ok1 || !ok2 {
				return ""
			}
			ca, _ := parseCertPEM(a)
			cb, _ := parseCertPEM(b)
			if ca != nil && cb != nil && ca.PublicKeyAlgorithm == cb.PublicKeyAlgorithm {
				return "certificate and alternative certificate need to have different type (e.g. RSA and ECDSA), the provided certificates were both of the same type"
			}
			return ""
		}),
	}
	return r
}

func caCertificatesRecord() *record {
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		fld("cert", tString, req(), customStr(validateCertificate)),
		fld("cert_digest", tString, unique()),
		tagsField(),
	)
	r.checks = []*echeck{customCheck([]string{"cert"}, false, func(in map[string]any) string {
		c, msg := parseCertPEM(in["cert"].(string))
		switch {
		case msg != "":
			return ""
		case strings.Count(in["cert"].(string), "-----BEGIN CERTIFICATE-----") > 1:
			// ca_certificates.lua counts the BEGIN lines before parsing.
			return "please submit only one certificate at a time"
		case !c.IsCA:
			return `certificate does not appear to be a CA because it is missing the "CA" basic constraint`
		case time.Now().After(c.NotAfter):
			return `certificate expired, "Not After" time is in the past`
		}
		return ""
	})}
	return r
}

func snisRecord() *record {
	return newRecord(
		uuidField("id"),
		fld("name", tString, req(), unique(), customStr(validateWildcardHost)),
		tsField("created_at"), tsField("updated_at"),
		tagsField(),
		foreignField("certificate", "certificates", req()),
	)
}

func consumersRecord() *record {
	r := newRecord(
		uuidField("id"), tsField("created_at"), tsField("updated_at"),
		fld("username", tString, unique()),
		fld("custom_id", tString, unique()),
		tagsField(),
	)
	r.checks = []*echeck{atLeastOneOf("custom_id", "username")}
	return r
}

func parseDecimal(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
