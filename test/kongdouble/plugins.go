package kongdouble

import (
	"fmt"
	"regexp"
	"strings"
)

// bundledPlugins are Kong 3.9's bundled plugins with their handler
// priorities (what GET / reports in plugins.available_on_server).
var bundledPlugins = map[string]int{
	"pre-function": 1000000, "correlation-id": 100001, "zipkin": 100000,
	"bot-detection": 2500, "cors": 2000, "session": 1900, "acme": 1705,
	"jwt": 1450, "oauth2": 1400, "key-auth": 1250, "ldap-auth": 1200,
	"basic-auth": 1100, "hmac-auth": 1030, "grpc-gateway": 998,
	"ip-restriction": 990, "request-size-limiting": 951, "acl": 950,
	"rate-limiting": 910, "response-ratelimiting": 900,
	"request-transformer": 801, "response-transformer": 800, "redirect": 779,
	"ai-request-transformer": 777, "ai-prompt-template": 773,
	"ai-prompt-decorator": 772, "ai-prompt-guard": 771, "ai-proxy": 770,
	"ai-response-transformer": 769, "standard-webhooks": 760,
	"aws-lambda": 750, "azure-functions": 749, "proxy-cache": 100,
	"opentelemetry": 14, "prometheus": 13, "http-log": 12, "statsd": 11,
	"datadog": 10, "file-log": 9, "udp-log": 8, "tcp-log": 7, "loggly": 6,
	"syslog": 4, "grpc-web": 3, "request-termination": 2, "post-function": -1000,
}

// pluginSubschema builds the subschema Kong loads for an enabled plugin.
// The plugins konglet generates are modelled field by field; the others
// accept any config table.
func pluginSubschema(name string) *subschema {
	protocols := protocolsField(httpProtocols)
	var config *record
	fields := map[string]*field{}
	switch name {
	case "request-transformer":
		protocols = protocolsField(protocolNames)
		config = requestTransformerConfig()
	case "response-transformer":
		config = responseTransformerConfig()
	case "request-termination":
		config = requestTerminationConfig()
	case "redirect":
		config = newRecord(
			fld("status_code", tInteger, req(), dflt(301.0), between(100, 599)),
			fld("location", tString, req(), customStr(validateURL)),
			fld("keep_incoming_path", tBoolean, dflt(false)),
		)
	case "cors":
		fields["consumer"] = foreignField("consumer", "consumers", eqNull())
		config = corsConfig()
	case "pre-function", "post-function":
		protocols = protocolsField(protocolNames)
		fields["consumer"] = foreignField("consumer", "consumers", eqNull())
		config = serverlessConfig(name)
	default:
		protocols = protocolsField(protocolNames)
	}
	cfg := fld("config", tRecord, req(), recOf(config))
	switch {
	case config == nil:
		cfg = fld("config", tRecord, dflt(map[string]any{}))
	case name == "request-termination":
		cfg.custom = requestTerminationCheck
	case name == "pre-function" || name == "post-function":
		cfg.custom = serverlessCheck
	}
	fields["config"] = cfg
	fields["protocols"] = protocols
	return &subschema{fields: fields}
}

func arrayOf(name string, el *field) *field {
	return fld(name, tArray, req(), dflt([]any{}), elems(el))
}

// nestedRecord is a config sub-record; plugin config records are expanded
// with their defaults even when absent.
func nestedRecord(name string, fields ...*field) *field {
	return fld(name, tRecord, req(), recOf(newRecord(fields...)))
}

var reTemplateExpr = regexp.MustCompile(`\$\(`)

// checkForValue is request-transformer's check_for_value.
func checkForValue(entry string) string {
	name, value, _ := strings.Cut(entry, ":")
	value = strings.TrimLeft(value, ":")
	if value == "" {
		return "key '" + name + "' has no value"
	}
	if n := len(reTemplateExpr.FindAllString(value, -1)); n > 0 && strings.Count(value, ")") < n {
		return "value '" + value + "' is not in supported format, error:unbalanced template expression"
	}
	return ""
}

// headerPair is validate_headers(pair, value_validator).
func headerPair(valueCheck func(string) bool) func(string) string {
	return func(pair string) string {
		name, value, _ := strings.Cut(pair, ":")
		value = strings.TrimLeft(value, ":")
		if validateHeaderName(name) != "" {
			return fmt.Sprintf("'%s' is not a valid header", name)
		}
		if valueCheck != nil && !valueCheck(value) {
			return fmt.Sprintf("'%s' is not a valid header", value)
		}
		return ""
	}
}

func requestTransformerConfig() *record {
	str := func() *field { return fld("", tString) }
	colon := func() *field { return fld("", tString, customStr(checkForValue)) }
	headerValues := func() *field {
		return fld("", tString, matchRe(`^[^:]+:.*$`), customStr(headerPair(validHeaderValue)))
	}
	colonRecord := func(name string, extra ...*field) *field {
		fs := []*field{arrayOf("body", colon()), arrayOf("headers", headerValues()), arrayOf("querystring", colon())}
		return nestedRecord(name, append(fs, extra...)...)
	}
	return newRecord(
		fld("http_method", tString, matchRe(`^[A-Z]+$`)),
		nestedRecord("remove", arrayOf("body", str()), arrayOf("headers", fld("", tString, customStr(headerPair(nil)))), arrayOf("querystring", str())),
		nestedRecord("rename", arrayOf("body", colon()),
			arrayOf("headers", fld("", tString, matchRe(`^[^:]+:.*$`), customStr(headerPair(func(v string) bool { return validateHeaderName(v) == "" })))),
			arrayOf("querystring", colon())),
		colonRecord("replace", fld("uri", tString)),
		colonRecord("add"),
		colonRecord("append"),
	)
}

func responseTransformerConfig() *record {
	colonStr := func() *field { return fld("", tString, matchRe(`^[^:]+:.*$`)) }
	headerValues := func() *field {
		return fld("", tString, matchRe(`^[^:]+:.*$`), customStr(headerPair(validHeaderValue)))
	}
	colonRecord := func(name string) *field {
		return nestedRecord(name,
			arrayOf("json", colonStr()),
			arrayOf("json_types", fld("", tString, oneOf("boolean", "number", "string"))),
			arrayOf("headers", headerValues()))
	}
	return newRecord(
		nestedRecord("remove", arrayOf("json", fld("", tString)), arrayOf("headers", fld("", tString))),
		nestedRecord("rename", arrayOf("json", colonStr()),
			arrayOf("headers", fld("", tString, matchRe(`^[^:]+:.*$`), customStr(headerPair(func(v string) bool { return validateHeaderName(v) == "" }))))),
		colonRecord("replace"),
		colonRecord("add"),
		colonRecord("append"),
	)
}

func requestTerminationConfig() *record {
	return newRecord(
		fld("status_code", tInteger, req(), dflt(503.0), between(100, 599)),
		fld("message", tString),
		fld("content_type", tString),
		fld("body", tString),
		fld("echo", tBoolean, req(), dflt(false)),
		headerNameField("trigger"),
	)
}

// requestTerminationCheck is request-termination's config custom_validator.
func requestTerminationCheck(v any) string {
	m, _ := v.(map[string]any)
	present := func(k string) bool { s, ok := m[k].(string); return ok && s != "" }
	switch {
	case present("message") && (present("content_type") || present("body")):
		return "message cannot be used with content_type or body"
	case present("content_type") && !present("body"):
		return "content_type requires a body"
	case m["echo"] == true && (present("content_type") || present("body")):
		return "echo cannot be used with content_type and body"
	}
	return ""
}

// serverlessPhases are the phases of pre-function and post-function
// (kong/plugins/pre-function/_schema.lua).
var serverlessPhases = []string{"certificate", "rewrite", "access", "header_filter", "body_filter", "log"}

func serverlessConfig(plugin string) *record {
	var fields []*field
	for _, phase := range serverlessPhases {
		fields = append(fields, arrayOf(phase, fld("", tString, customStr(luaSyntax(plugin)))))
	}
	return newRecord(fields...)
}

// serverlessCheck is the schemas' at_least_one_of over the phases.
func serverlessCheck(v any) string {
	m, _ := v.(map[string]any)
	names := make([]string, len(serverlessPhases))
	for i, phase := range serverlessPhases {
		if len(strList(m[phase])) > 0 {
			return ""
		}
		names[i] = "'config." + phase + "'"
	}
	return "at least one of these fields must be non-empty: " + strings.Join(names, ", ")
}

var corsMethods = []any{"GET", "HEAD", "PUT", "PATCH", "POST", "DELETE", "OPTIONS", "TRACE", "CONNECT"}

func corsConfig() *record {
	return newRecord(
		fld("origins", tArray, elems(fld("", tString, customStr(func(s string) string {
			if s == "*" || pcreCompileError(s) == "" {
				return ""
			}
			return fmt.Sprintf("'%s' is not a valid regex", s)
		})))),
		fld("headers", tArray, elems(fld("", tString))),
		fld("exposed_headers", tArray, elems(fld("", tString))),
		fld("methods", tArray, dflt(append([]any(nil), corsMethods...)), elems(fld("", tString, oneOf(corsMethods...)))),
		fld("max_age", tNumber),
		fld("credentials", tBoolean, req(), dflt(false)),
		fld("private_network", tBoolean, req(), dflt(false)),
		fld("preflight_continue", tBoolean, req(), dflt(false)),
		fld("allow_origin_absent", tBoolean, req(), dflt(true)),
	)
}

// validateURL is typedefs.url (socket.url parsing).
func validateURL(s string) string {
	parts := reURL.FindStringSubmatch(s)
	host := parts[2]
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = host[at+1:]
	}
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	if !strings.Contains(s, "//") || host == "" {
		return "missing host in url"
	}
	if parts[1] == "" {
		return "missing scheme in url"
	}
	return ""
}

func pluginsRecord(enabled []string) *record {
	r := newRecord(
		uuidField("id"),
		fld("name", tString, req()),
		utf8NameField("instance_name"),
		tsField("created_at"), tsField("updated_at"),
		foreignField("route", "routes"),
		foreignField("service", "services"),
		foreignField("consumer", "consumers"),
		fld("config", tRecord, func(f *field) { f.abstract = true }),
		protocolsField(protocolNames),
		fld("enabled", tBoolean, req(), dflt(true)),
		tagsField(),
		fld("ordering", tRecord, recOf(newRecord(orderingField("before"), orderingField("after")))),
	)
	r.subKey = "name"
	r.subErr = "plugin '%s' not enabled; add it to the 'plugins' configuration property"
	r.subs = map[string]*subschema{}
	for _, name := range enabled {
		r.subs[name] = pluginSubschema(name)
	}
	return r
}

func orderingField(name string) *field {
	return fld(name, tMap, func(f *field) {
		f.keys = fld("", tString, oneOf("access"))
		f.values = fld("", tArray, elems(fld("", tString)))
	})
}
