package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/schemas/internal/fastpath"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/tidwall/gjson"
)

// DefaultMaxDiagnostics is the cap Validate applies when max <= 0.
const DefaultMaxDiagnostics = 20

// maxReceived is how many characters of a received value a diagnostic keeps.
const maxReceived = 200

// ErrNotJSON is returned by Validate when the document is not one JSON value.
var ErrNotJSON = errors.New("document is not JSON")

// Validate checks doc (JSON text, already sanitized) against the schema and
// returns at most max diagnostics (max <= 0 means DefaultMaxDiagnostics),
// sorted by path, deduplicated, with the count of those left out. err is
// non-nil only when doc is not JSON (it wraps ErrNotJSON). Safe for
// concurrent use.
func (s *Schema) Validate(doc []byte, max int) (diags []Diagnostic, omitted int, err error) {
	if s.fast != nil && s.fast.Accept(doc) {
		return nil, 0, nil
	}
	return s.validate(doc, max)
}

// validate is Validate by the general validator alone.
func (s *Schema) validate(doc []byte, max int) (diags []Diagnostic, omitted int, err error) {
	if max <= 0 {
		max = DefaultMaxDiagnostics
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if d, ok := hugeNumber(v, nil); ok {
		d.Received = (&collector{doc: doc}).received(d.Path)
		return []Diagnostic{d}, 0, nil
	}
	verr := s.compiled.Validate(v)
	if verr == nil {
		return nil, 0, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return nil, 0, fmt.Errorf("validating against schema %s: %w", s.ID, verr)
	}
	c := collector{s: s, doc: doc}
	c.walk(ve)
	diags = normalize(c.out)
	if len(diags) > max {
		omitted = len(diags) - max
		diags = diags[:max:max]
	}
	return diags, omitted, nil
}

// maxExponent bounds the decimal exponent of numbers Validate accepts. The
// validator compares numbers as exact rationals, and 1e999999999 would take
// it minutes and gigabytes: such a number (far outside float64) is reported
// as a diagnostic instead. The fast path refuses the same numbers: the
// bound is fastpath.MaxExponent.
const maxExponent = fastpath.MaxExponent

// hugeNumber finds the first number whose exponent is beyond maxExponent.
func hugeNumber(v any, path []string) (Diagnostic, bool) {
	switch x := v.(type) {
	case json.Number:
		i := strings.IndexAny(string(x), "eE")
		if i < 0 {
			return Diagnostic{}, false
		}
		exp, err := strconv.Atoi(strings.TrimPrefix(string(x[i+1:]), "+"))
		if err == nil && exp >= -maxExponent && exp <= maxExponent {
			return Diagnostic{}, false
		}
		return Diagnostic{Path: pointer(path), Keyword: "type",
			Message:  "number exponent out of range",
			Expected: fmt.Sprintf("a number with an exponent between -%d and %d", maxExponent, maxExponent)}, true
	case []any:
		for i, e := range x {
			if d, ok := hugeNumber(e, append(path, strconv.Itoa(i))); ok {
				return d, true
			}
		}
	case map[string]any:
		for k, e := range x {
			if d, ok := hugeNumber(e, append(path, k)); ok {
				return d, true
			}
		}
	}
	return Diagnostic{}, false
}

// collector turns the validator's error tree into diagnostics.
type collector struct {
	s   *Schema
	doc []byte
	out []Diagnostic
}

// walk descends through the nodes that only group other errors and emits
// the leaves: the root causes.
func (c *collector) walk(e *jsonschema.ValidationError) {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		if len(e.Causes) == 0 {
			c.leaf(e)
			return
		}
		for _, cause := range e.Causes {
			c.walk(cause)
		}
	case *kind.AnyOf:
		c.alternatives(e, "anyOf", c.branches(e, func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AnyOf }))
	case *kind.OneOf:
		if len(k.Subschemas) > 0 { // more than one branch matched: a leaf
			c.leaf(e)
			return
		}
		c.alternatives(e, "oneOf", c.branches(e, func(s *jsonschema.Schema) []*jsonschema.Schema { return s.OneOf }))
	default:
		c.leaf(e)
	}
}

// branches returns the subschemas of an anyOf/oneOf node, or nil when the
// schema location is unknown.
func (c *collector) branches(e *jsonschema.ValidationError, pick func(*jsonschema.Schema) []*jsonschema.Schema) []*jsonschema.Schema {
	if sub := c.s.subs[e.SchemaURL]; sub != nil {
		return pick(sub)
	}
	return nil
}

// alternatives reports a failed anyOf/oneOf as one root cause: the best
// branch's diagnostics when some branch matched the value's type, else one
// diagnostic at the value naming every alternative.
func (c *collector) alternatives(e *jsonschema.ValidationError, keyword string, branches []*jsonschema.Schema) {
	path := pointer(e.InstanceLocation)
	var best []Diagnostic
	bestSet := false
	for _, cause := range e.Causes {
		sub := collector{s: c.s, doc: c.doc}
		sub.walk(cause)
		mismatch := false
		for _, d := range sub.out {
			if d.Path == path && (d.Keyword == "type" || d.Keyword == "const" || d.Keyword == "enum" || d.Keyword == keyword) {
				mismatch = true
				break
			}
		}
		if mismatch {
			continue
		}
		if !bestSet || len(sub.out) < len(best) {
			best, bestSet = sub.out, true
		}
	}
	if bestSet && len(best) > 0 {
		c.out = append(c.out, best...)
		return
	}
	var alts []string
	for _, b := range branches {
		if d := describe(b); d != "" && !slices.Contains(alts, d) {
			alts = append(alts, d)
		}
	}
	d := Diagnostic{
		Path:     path,
		Keyword:  keyword,
		Message:  e.ErrorKind.LocalizedString(c.s.printer),
		Expected: strings.Join(alts, ", or "),
		Received: c.received(path),
	}
	if len(alts) == len(branches) && allTypeOnly(branches) {
		d.Keyword = "type"
		d.Expected = strings.Join(alts, " or ")
	}
	c.out = append(c.out, d)
}

// allTypeOnly reports whether every branch is a bare type constraint
// (typical of nullable fields: anyOf [{type: string}, {type: null}]).
func allTypeOnly(bs []*jsonschema.Schema) bool {
	for _, b := range bs {
		if b.Types == nil || b.Types.IsEmpty() || describe(b) != strings.Join(b.Types.ToStrings(), " or ") {
			return false
		}
	}
	return true
}

// leaf emits the diagnostics of one failing keyword.
func (c *collector) leaf(e *jsonschema.ValidationError) {
	path := pointer(e.InstanceLocation)
	sub := c.s.subs[e.SchemaURL]
	msg := e.ErrorKind.LocalizedString(c.s.printer)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			d := Diagnostic{Path: join(path, name), Keyword: "required",
				Message: fmt.Sprintf("missing property %q", name)}
			if sub != nil {
				d.Expected = describe(sub.Properties[name])
			}
			c.out = append(c.out, d)
		}
		return
	case *kind.DependentRequired:
		for _, name := range k.Missing {
			c.out = append(c.out, Diagnostic{Path: join(path, name), Keyword: "dependentRequired",
				Message: fmt.Sprintf("missing property %q, required when %q is present", name, k.Prop)})
		}
		return
	case *kind.Dependency:
		for _, name := range k.Missing {
			c.out = append(c.out, Diagnostic{Path: join(path, name), Keyword: "dependencies",
				Message: fmt.Sprintf("missing property %q, required when %q is present", name, k.Prop)})
		}
		return
	case *kind.AdditionalProperties:
		allowed := ""
		if sub != nil && len(sub.Properties) > 0 {
			names := make([]string, 0, len(sub.Properties))
			for n := range sub.Properties {
				names = append(names, n)
			}
			slices.Sort(names)
			allowed = "allowed properties: " + strings.Join(names, ", ")
		}
		for _, name := range k.Properties {
			p := join(path, name)
			c.out = append(c.out, Diagnostic{Path: p, Keyword: "additionalProperties",
				Message: fmt.Sprintf("property %q is not allowed", name), Expected: allowed, Received: c.received(p)})
		}
		return
	}
	d := Diagnostic{Path: path, Keyword: keywordOf(e.ErrorKind), Message: msg, Received: c.received(path)}
	switch k := e.ErrorKind.(type) {
	case *kind.FalseSchema:
		d.Expected = "no value here"
	case *kind.Not:
		d.Expected = "a value that does not match the 'not' schema"
	case *kind.OneOf:
		d.Expected = "a value matching exactly one alternative"
	case *kind.Type:
		d.Expected = describe(sub)
		if d.Expected == "" {
			d.Expected = strings.Join(k.Want, " or ")
		}
	case *kind.Enum:
		d.Expected = oneOf(k.Want)
	case *kind.Const:
		d.Expected = "exactly " + jsonText(k.Want)
	case *kind.Format:
		d.Expected = describe(sub)
		if d.Expected == "" {
			d.Expected = "format " + formatHint(k.Want)
		}
	case *kind.Pattern:
		d.Expected = "string matching " + k.Want
	default:
		d.Expected = describe(sub)
	}
	c.out = append(c.out, d)
}

// received reads the value at a JSON Pointer with gjson, as JSON text cut to
// 200 characters; "" when absent.
func (c *collector) received(ptr string) string {
	if ptr == "" {
		return cut(string(bytes.TrimSpace(c.doc)))
	}
	var sb strings.Builder
	for i, seg := range strings.Split(ptr[1:], "/") {
		if i > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(gjson.Escape(unescapePointer(seg)))
	}
	r := gjson.GetBytes(c.doc, sb.String())
	if !r.Exists() {
		return ""
	}
	return cut(r.Raw)
}

func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxReceived {
		return s
	}
	n := 0
	for i := range s {
		if n == maxReceived-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func keywordOf(k jsonschema.ErrorKind) string {
	switch k.(type) {
	case *kind.FalseSchema:
		return "false"
	case *kind.Not:
		return "not"
	case *kind.InvalidJsonValue:
		return "type"
	case *kind.Schema, *kind.Group:
		return "schema"
	}
	if kp := k.KeywordPath(); len(kp) > 0 {
		return kp[0]
	}
	return "schema"
}

// pointer builds a JSON Pointer from instance location segments.
func pointer(segs []string) string {
	var sb strings.Builder
	for _, s := range segs {
		sb.WriteByte('/')
		sb.WriteString(escapePointer(s))
	}
	return sb.String()
}

func join(ptr, name string) string { return ptr + "/" + escapePointer(name) }

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// normalize sorts by path (array indices numerically), then keyword and
// message, and drops duplicates.
func normalize(ds []Diagnostic) []Diagnostic {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		if c := comparePointers(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(a.Keyword, b.Keyword); c != 0 {
			return c
		}
		if c := strings.Compare(a.Message, b.Message); c != 0 {
			return c
		}
		if c := strings.Compare(a.Expected, b.Expected); c != 0 {
			return c
		}
		return strings.Compare(a.Received, b.Received)
	})
	return slices.CompactFunc(ds, func(a, b Diagnostic) bool { return a == b })
}

// comparePointers orders JSON Pointers segment by segment, numbers as
// numbers, so /items/2 sorts before /items/10.
func comparePointers(a, b string) int {
	for a != "" && b != "" {
		var sa, sb string
		sa, a = nextSegment(a)
		sb, b = nextSegment(b)
		if sa == sb {
			continue
		}
		na, errA := strconv.ParseUint(sa, 10, 64)
		nb, errB := strconv.ParseUint(sb, 10, 64)
		switch {
		case errA == nil && errB == nil && na != nb:
			if na < nb {
				return -1
			}
			return 1
		case errA == nil && errB == nil: // "0" and "000"
			return strings.Compare(sa, sb)
		case errA == nil:
			return -1
		case errB == nil:
			return 1
		}
		return strings.Compare(sa, sb)
	}
	return strings.Compare(a, b)
}

func nextSegment(p string) (seg, rest string) {
	p = strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// describe says in short what a subschema accepts: "number > 0",
// "string in format date (YYYY-MM-DD)", "one of \"EUR\", \"USD\"".
func describe(sch *jsonschema.Schema) string {
	for depth := 0; sch != nil && depth < 8; depth++ {
		if sch.Types != nil || sch.Enum != nil || sch.Const != nil || sch.Ref == nil {
			break
		}
		sch = sch.Ref
	}
	if sch == nil {
		return ""
	}
	if sch.Bool != nil {
		if *sch.Bool {
			return "any value"
		}
		return "no value"
	}
	if sch.Const != nil {
		return "exactly " + jsonText(*sch.Const)
	}
	if sch.Enum != nil {
		return oneOf(sch.Enum.Values)
	}
	var parts []string
	if sch.Types != nil && !sch.Types.IsEmpty() {
		parts = append(parts, strings.Join(sch.Types.ToStrings(), " or "))
	}
	var cons []string
	add := func(op string, r *big.Rat) {
		if r != nil {
			cons = append(cons, op+" "+ratText(r))
		}
	}
	add(">", sch.ExclusiveMinimum)
	add(">=", sch.Minimum)
	add("<", sch.ExclusiveMaximum)
	add("<=", sch.Maximum)
	if len(cons) > 0 {
		parts = append(parts, strings.Join(cons, " and "))
	}
	if sch.MultipleOf != nil {
		parts = append(parts, "a multiple of "+ratText(sch.MultipleOf))
	}
	if sch.Format != nil {
		parts = append(parts, "in format "+formatHint(sch.Format.Name))
	}
	if sch.Pattern != nil {
		parts = append(parts, "matching "+sch.Pattern.String())
	}
	parts = appendRange(parts, sch.MinLength, sch.MaxLength, "character")
	parts = appendRange(parts, sch.MinItems, sch.MaxItems, "item")
	if sch.UniqueItems {
		parts = append(parts, "with unique items")
	}
	parts = appendRange(parts, sch.MinProperties, sch.MaxProperties, "property")
	return strings.Join(parts, " ")
}

func appendRange(parts []string, min, max *int, unit string) []string {
	plural := func(n int) string {
		if n == 1 {
			return unit
		}
		if strings.HasSuffix(unit, "y") {
			return strings.TrimSuffix(unit, "y") + "ies"
		}
		return unit + "s"
	}
	switch {
	case min != nil && max != nil && *min == *max:
		return append(parts, fmt.Sprintf("of exactly %d %s", *min, plural(*min)))
	case min != nil && max != nil:
		return append(parts, fmt.Sprintf("of %d to %d %s", *min, *max, plural(*max)))
	case min != nil:
		return append(parts, fmt.Sprintf("of at least %d %s", *min, plural(*min)))
	case max != nil:
		return append(parts, fmt.Sprintf("of at most %d %s", *max, plural(*max)))
	}
	return parts
}

// formatHint names a format with what it looks like.
func formatHint(name string) string {
	switch name {
	case "date":
		return "date (YYYY-MM-DD)"
	case "date-time":
		return "date-time (RFC 3339, e.g. 2024-01-31T09:30:00Z)"
	case "time":
		return "time (HH:MM:SS with offset, e.g. 09:30:00Z)"
	case "email":
		return "email (name@example.com)"
	case "uuid":
		return "uuid (8-4-4-4-12 hex digits)"
	case "uri":
		return "uri (absolute, with a scheme)"
	}
	return name
}

func oneOf(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = jsonText(v)
	}
	if len(parts) == 1 {
		return "exactly " + parts[0]
	}
	return "one of " + strings.Join(parts, ", ")
}

func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(buf.String(), "\n")
}

func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Line is the diagnostic as a repair line for the model:
// `- /items/2/price: expected number > 0, got "12,50"`.
func (d Diagnostic) Line() string {
	p := d.Path
	if p == "" {
		p = "(root)"
	}
	switch d.Keyword {
	case "required", "dependentRequired", "dependencies":
		if d.Expected != "" {
			return fmt.Sprintf("- %s: missing required property, expected %s", p, d.Expected)
		}
		return fmt.Sprintf("- %s: missing required property", p)
	case "additionalProperties", "false", "unevaluatedProperties":
		s := fmt.Sprintf("- %s: property not allowed, remove it", p)
		if d.Expected != "" && d.Expected != "no value here" {
			s += " (" + d.Expected + ")"
		}
		return s
	}
	if d.Keyword == KeywordGrounded {
		return fmt.Sprintf("- %s [%s]: %s", p, d.Keyword, d.Message)
	}
	if strings.HasPrefix(d.Keyword, KeywordRules+"/") {
		s := fmt.Sprintf("- %s [%s]: %s (rule: %s)", p, d.Keyword, d.Message, d.Expected)
		if d.Received != "" {
			s += ", got " + d.Received
		}
		return s
	}
	what := d.Message
	if d.Expected != "" {
		what = "expected " + d.Expected
	}
	if d.Received != "" {
		return fmt.Sprintf("- %s: %s, got %s", p, what, d.Received)
	}
	return fmt.Sprintf("- %s: %s", p, what)
}

// Lines renders diagnostics as repair lines, one per line, with a last line
// counting the omitted ones.
func Lines(ds []Diagnostic, omitted int) string {
	var sb strings.Builder
	for i, d := range ds {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(d.Line())
	}
	if omitted > 0 {
		if len(ds) > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "- ... and %d more", omitted)
	}
	return sb.String()
}
