package kongdouble

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// This file ports Kong's small host/IP/path helpers (kong/tools/ip.lua,
// kong/tools/uri.lua, kong/db/schema/typedefs.lua) so that validation
// messages and edge cases match Kong's, not Go's.

// hostInfo is the result of Kong's normalize_ip.
type hostInfo struct {
	typ     string // "ipv4", "ipv6" or "name"
	host    string
	port    int
	hasPort bool
}

// hostnameType classifies by exclusion, exactly like Kong's hostname_type.
func hostnameType(name string) string {
	if strings.Count(name, ":") > 1 {
		return "ipv6"
	}
	rest := strings.ReplaceAll(name, ":", "")
	if rest != "" && strings.Trim(rest, "0123456789.") == "" {
		return "ipv4"
	}
	return "name"
}

var (
	reIPv4WithPort = regexp.MustCompile(`^(\d\d?\d?)\.(\d\d?\d?)\.(\d\d?\d?)\.(\d\d?\d?):(\d+)$`)
	reIPv4         = regexp.MustCompile(`^(\d\d?\d?)\.(\d\d?\d?)\.(\d\d?\d?)\.(\d\d?\d?)$`)
	reHexGroups    = regexp.MustCompile(`^([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4}):([0-9a-fA-F]{1,4})$`)
	reHostChars    = regexp.MustCompile(`^[0-9A-Za-z\-._]+$`)
	reTrailingPort = regexp.MustCompile(`:(\d+)$`)
)

func normalizeIPv4(addr string) (hostInfo, string) {
	var m []string
	if strings.Contains(addr, ":") {
		m = reIPv4WithPort.FindStringSubmatch(addr)
	} else {
		m = reIPv4.FindStringSubmatch(addr)
	}
	if m == nil {
		return hostInfo{}, "invalid ipv4 address: " + addr
	}
	var oct [4]int
	for i := 0; i < 4; i++ {
		oct[i], _ = strconv.Atoi(m[i+1])
		if oct[i] > 255 {
			return hostInfo{}, "invalid ipv4 address: " + addr
		}
	}
	h := hostInfo{typ: "ipv4", host: fmt.Sprintf("%d.%d.%d.%d", oct[0], oct[1], oct[2], oct[3])}
	if len(m) == 6 {
		p, err := strconv.Atoi(m[5])
		if err != nil || p > 65535 {
			return hostInfo{}, "invalid port number"
		}
		h.port, h.hasPort = p, true
	}
	return h, ""
}

func normalizeIPv6(addr string) (hostInfo, string) {
	check, port := addr, ""
	hasPort := false
	if strings.HasPrefix(addr, "[") {
		end := strings.Index(addr, "]")
		if end > 0 {
			check = addr[1:end]
			rest := addr[end+1:]
			if rest != "" {
				if !strings.HasPrefix(rest, ":") || strings.Trim(rest[1:], "0123456789") != "" {
					return hostInfo{}, "invalid ipv6 address"
				}
				port, hasPort = rest[1:], true
			}
		}
	}
	if strings.HasPrefix(check, ":") {
		check = "0" + check
	}
	if strings.HasSuffix(check, ":") {
		check += "0"
	}
	if strings.Contains(check, "::") {
		count := strings.Count(check, ":")
		check = strings.Replace(check, "::", ":"+strings.Repeat("0:", max(8-count, 0)), 1)
	}
	m := reHexGroups.FindStringSubmatch(check)
	if m == nil {
		return hostInfo{}, "invalid ipv6 address: " + addr
	}
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = strings.ToLower(strings.Repeat("0", 4-len(m[i+1])) + m[i+1])
	}
	h := hostInfo{typ: "ipv6", host: strings.Join(groups, ":")}
	if hasPort {
		p, err := strconv.Atoi(port)
		if err != nil || p > 65535 {
			return hostInfo{}, "invalid port number"
		}
		h.port, h.hasPort = p, true
	}
	return h, ""
}

func checkHostname(addr string) (hostInfo, string) {
	name := addr
	h := hostInfo{typ: "name"}
	if m := reTrailingPort.FindStringSubmatch(addr); m != nil {
		name = addr[:len(addr)-len(m[1])-1]
		p, err := strconv.Atoi(m[1])
		if err != nil || p > 65535 {
			return hostInfo{}, "invalid port number"
		}
		h.port, h.hasPort = p, true
	}
	if !reHostChars.MatchString(name) {
		return hostInfo{}, "invalid hostname: " + addr
	}
	segs := strings.Split(name, ".")
	for i, s := range segs {
		if strings.HasSuffix(s, "-") || (s == "" && i != len(segs)-1) {
			return hostInfo{}, "invalid hostname: " + addr
		}
	}
	h.host = name
	return h, ""
}

// normalizeIP is Kong's normalize_ip: an empty error means success.
func normalizeIP(addr string) (hostInfo, string) {
	switch hostnameType(addr) {
	case "ipv4":
		return normalizeIPv4(addr)
	case "ipv6":
		return normalizeIPv6(addr)
	}
	return checkHostname(addr)
}

func validateHost(host string) string {
	h, err := normalizeIP(host)
	if err != "" && err != "invalid port number" {
		return "invalid value: " + host
	}
	if err == "invalid port number" || h.hasPort {
		return "must not have a port"
	}
	return ""
}

func validateHostWithOptionalPort(host string) string {
	_, err := normalizeIP(host)
	return err
}

func validateSNI(host string) string {
	h, err := normalizeIP(host)
	if err != "" && err != "invalid port number" {
		return "invalid value: " + host
	}
	if err == "" && h.typ != "name" {
		return "must not be an IP"
	}
	if err == "invalid port number" || h.hasPort {
		return "must not have a port"
	}
	return ""
}

func validateWildcardHost(host string) string {
	if idx := strings.Index(host, "*"); idx >= 0 {
		if idx != 0 && idx != len(host)-1 {
			return "wildcard must be leftmost or rightmost character"
		}
		if strings.Count(host, "*") > 1 {
			return "only one wildcard must be specified"
		}
		host = strings.ReplaceAll(host, "*", "wildcard")
	}
	return validateSNI(host)
}

func validateHostWithWildcards(host string) string {
	return validateHostWithOptionalPort(strings.ReplaceAll(host, "*", "abc"))
}

func isValidIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

func isValidIPOrCIDR(s string) bool {
	if isValidIP(s) {
		return true
	}
	_, err := netip.ParsePrefix(s)
	return err == nil
}

var reRFC3986Path = regexp.MustCompile(`^/[0-9A-Za-z.\-_~/%:@!$&'()*+,;=]*$`)
var rePercentTriplet = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)
var rePercentBad = regexp.MustCompile(`%.?.?`)

// validatePath is typedefs.path's custom validator; code tells which check failed.
func validatePath(path string) (msg, code string) {
	if !reRFC3986Path.MatchString(path) {
		return "invalid path: '" + path + "' (characters outside of the reserved list of RFC 3986 found)", "rfc3986"
	}
	raw := rePercentTriplet.ReplaceAllString(path, "___")
	if strings.Contains(raw, "%") {
		return "invalid url-encoded value: '" + rePercentBad.FindString(raw) + "'", "percent"
	}
	return "", ""
}

// isReserved is uri.lua's RESERVED_CHARS: the only triplets normalize
// keeps encoded (it decodes unreserved and "other" characters alike, so
// %20 becomes a space).
func isReserved(c byte) bool {
	return strings.IndexByte("!*'();:@&=+$,/?%#[]", c) >= 0
}

// normalizePath is kong.tools.uri.normalize(uri, true): it decodes
// percent-encoded characters except reserved ones (upper-casing those),
// merges slashes and removes dot segments.
func normalizePath(uri string) string {
	if uri == "" || uri == "/" {
		return uri
	}
	if strings.Contains(uri, "%") {
		var b strings.Builder
		for i := 0; i < len(uri); i++ {
			if uri[i] == '%' && i+2 < len(uri) && isHex(uri[i+1]) && isHex(uri[i+2]) {
				v, _ := strconv.ParseUint(uri[i+1:i+3], 16, 8)
				if !isReserved(byte(v)) {
					b.WriteByte(byte(v))
				} else {
					b.WriteString("%" + strings.ToUpper(uri[i+1:i+3]))
				}
				i += 2
				continue
			}
			b.WriteByte(uri[i])
		}
		uri = b.String()
	}
	if !strings.Contains(uri, ".") && !strings.Contains(uri, "//") {
		return uri
	}
	segs := strings.Split(uri, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		case s == ".":
			if last {
				out = append(out, "")
			}
		case s == "" && i != 0 && !last:
			// merged slash
		default:
			out = append(out, s)
		}
	}
	res := strings.Join(out, "/")
	if res == "" {
		return "/"
	}
	if !strings.HasPrefix(res, "/") {
		res = "/" + res
	}
	return res
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

var reHeaderName = regexp.MustCompile(`^[a-zA-Z0-9\-_]+$`)

func validateHeaderName(name string) string {
	if name == "" {
		return "no header name provided"
	}
	if reHeaderName.MatchString(name) {
		return ""
	}
	return "bad header name '" + name + "', allowed characters are A-Z, a-z, 0-9, '_', and '-'"
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if (v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f {
			return false
		}
	}
	return true
}

var reUTF8Name = regexp.MustCompile(`^[0-9A-Za-z.\-_~\x{80}-\x{10FFFF}]+$`)

func validateUTF8Name(name string) string {
	if !reUTF8Name.MatchString(name) {
		return "invalid value '" + name + "': the only accepted ascii characters are alphanumerics or ., -, _, and ~"
	}
	return ""
}

var reTag = regexp.MustCompile(`^[ !-+\-.0-~\x{80}-\x{10FFFF}]+$`)

func validateTag(tag string) string {
	if !reTag.MatchString(tag) {
		return "invalid tag '" + tag + "': expected printable ascii (except `,` and `/`) or valid utf-8 sequences"
	}
	return ""
}

// splitHostPort is the router's split_host_port: what follows the first ':'
// is a port when Lua's tonumber reads a number there (so " 80", "0x50" and
// "80.9" are ports, and "[::1]:80" has none: "::1]:80" is no number).
func splitHostPort(h string) (string, int, bool) {
	i := strings.Index(h, ":")
	if i < 0 {
		return h, 0, false
	}
	v, ok := luaNumber(h[i+1:])
	if !ok {
		return h, 0, false
	}
	return h[:i], int(v), true
}

var (
	reLuaDecimal = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	reLuaHex     = regexp.MustCompile(`^0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?$`)
)

// luaNumber is LuaJIT's tonumber of a string (lj_strscan): surrounding
// whitespace, a sign, decimal or hexadecimal, fraction and exponent. The
// value is truncated towards zero as the router's integer fields take it;
// inf, nan and values beyond int32 (no port, and the double does not model
// how the router would wrap them) count as no number.
func luaNumber(s string) (float64, bool) {
	body := strings.Trim(s, " \t\n\v\f\r")
	neg := strings.HasPrefix(body, "-")
	if neg || strings.HasPrefix(body, "+") {
		body = body[1:]
	}
	text := body
	switch {
	case reLuaHex.MatchString(body):
		if !strings.ContainsAny(body, "pP") {
			text += "p0" // Go reads hexadecimal floats only with an exponent
		}
	case !reLuaDecimal.MatchString(body):
		return 0, false
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.Abs(v) > math.MaxInt32 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return math.Trunc(v), true
}
