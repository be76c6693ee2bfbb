package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Lint rules: each names a way a schema contradicts itself, so that no
// output can satisfy it.
const (
	RuleInvalidJSON       = "invalid_json"  // the file is not JSON
	RuleCompile           = "compile_error" // the validator refuses the schema
	RuleFileName          = "bad_file_name" // the file name cannot be a schema id
	RuleLimit             = "over_limit"    // the file is over the size or depth limit
	RuleDuplicateID       = "duplicate_id"  // two files give the same schema id
	RuleRef               = "bad_ref"       // a $ref reaches outside the schema directory
	RuleMinAboveMax       = "minimum_above_maximum"
	RuleMinLengthAboveMax = "min_length_above_max_length"
	RuleMinItemsAboveMax  = "min_items_above_max_items"
	RuleMinPropsAboveMax  = "min_properties_above_max_properties"
	RuleMinContainsAbove  = "min_contains_above_max_contains"
	RuleEmptyEnum         = "empty_enum"
	RuleRequiredForbidden = "required_forbidden"
	RuleConstNotInEnum    = "const_not_in_enum"
	RuleConstType         = "const_type_mismatch"
	RuleEnumType          = "enum_type_mismatch"
)

// Finding is one static lint finding: a place in a schema that no output
// can satisfy.
type Finding struct {
	Schema string `json:"schema"`
	File   string `json:"file,omitempty"`
	// Path is a JSON Pointer into the schema document, to the keyword at fault.
	Path       string `json:"path"`
	Rule       string `json:"rule"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// String is the finding on one line, for terminals.
func (f Finding) String() string {
	where := f.Schema
	if f.File != "" {
		where = f.File
	}
	p := f.Path
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("%s %s [%s]: %s (%s)", where, p, f.Rule, f.Message, f.Suggestion)
}

// Lint runs the static checks on a compiled schema.
func Lint(s *Schema) []Finding {
	fs := LintRaw(s.ID, s.Raw)
	for i := range fs {
		fs[i].File = s.File
	}
	return fs
}

// Lint runs the static checks on every schema of the registry, and reports
// every file that did not load (Broken) as findings too, in file order.
func (r *Registry) Lint() []Finding {
	var out []Finding
	for _, id := range r.IDs() {
		out = append(out, Lint(r.schemas[id])...)
	}
	for _, ce := range r.Broken() {
		out = append(out, brokenFindings(ce)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// brokenFindings turns why a file did not load into findings: the reason
// itself, and the static findings that often name the real cause.
func brokenFindings(ce *CompileError) []Finding {
	f := Finding{Schema: ce.ID, File: ce.File, Message: oneLine(ce.Err.Error())}
	var (
		le *LimitError
		ne *NameError
		pe *parseError
		de *duplicateError
		re *RefError
	)
	switch {
	case errors.As(ce.Err, &ne):
		f.Rule, f.Suggestion = RuleFileName, "rename the file: a schema id is "+allowedIDChars
	case errors.As(ce.Err, &le):
		f.Rule, f.Suggestion = RuleLimit, "make the schema smaller or flatter, or raise the "+le.Limit+" limit"
	case errors.As(ce.Err, &pe):
		f.Rule, f.Suggestion = RuleInvalidJSON, "fix the JSON syntax"
	case errors.As(ce.Err, &de):
		f.Rule, f.Suggestion = RuleDuplicateID, "keep one file per schema id (x.json or x.schema.json)"
	case errors.As(ce.Err, &re):
		f.Rule, f.Suggestion = RuleRef, "reference a file of the schema directory, by file name or by its $id"
	default:
		f.Rule, f.Suggestion = RuleCompile, "fix the schema so that it compiles (pipeline validate shows the same error)"
	}
	out := []Finding{f}
	for _, x := range ce.Findings {
		x.File = ce.File
		out = append(out, x)
	}
	return out
}

// LintDir lints every schema file of dir (the built-in examples for "")
// without requiring it to load: a file that does not (a bad name, over a
// limit, not JSON, a reference that does not resolve, not compiling) gets a
// finding saying why, besides the findings of the static checks. The error
// is only for an unreadable dir.
func LintDir(dir string) ([]Finding, error) {
	r, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return r.Lint(), nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// LintRaw runs the static checks on raw schema text. It works on JSON the
// validator refuses to compile (an empty enum under older drafts, say), so
// that the reason can still be named.
func LintRaw(id string, raw []byte) []Finding {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []Finding{{Schema: id, Rule: RuleInvalidJSON, Message: "schema is not valid JSON: " + err.Error(),
			Suggestion: "fix the JSON syntax"}}
	}
	l := linter{id: id}
	l.schema(doc, "")
	sort.SliceStable(l.out, func(i, j int) bool {
		if l.out[i].Path != l.out[j].Path {
			return l.out[i].Path < l.out[j].Path
		}
		return l.out[i].Rule < l.out[j].Rule
	})
	return l.out
}

type linter struct {
	id  string
	out []Finding
}

func (l *linter) add(path, rule, msg, suggestion string) {
	l.out = append(l.out, Finding{Schema: l.id, Path: path, Rule: rule, Message: msg, Suggestion: suggestion})
}

// schema checks one schema object and descends into its subschemas.
func (l *linter) schema(v any, path string) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	l.bounds(obj, path)
	l.pair(obj, path, "minLength", "maxLength", RuleMinLengthAboveMax, "characters")
	l.pair(obj, path, "minItems", "maxItems", RuleMinItemsAboveMax, "items")
	l.pair(obj, path, "minProperties", "maxProperties", RuleMinPropsAboveMax, "properties")
	l.pair(obj, path, "minContains", "maxContains", RuleMinContainsAbove, "matching items")
	l.enumConstType(obj, path)
	l.requiredForbidden(obj, path)
	l.truth(obj, path)

	for _, kw := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"} {
		if m, ok := obj[kw].(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				l.schema(m[k], path+"/"+kw+"/"+escapePointer(k))
			}
		}
	}
	for _, kw := range []string{"additionalProperties", "items", "additionalItems", "unevaluatedItems",
		"unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else", "contentSchema"} {
		switch x := obj[kw].(type) {
		case map[string]any:
			l.schema(x, path+"/"+kw)
		case []any:
			for i, s := range x {
				l.schema(s, fmt.Sprintf("%s/%s/%d", path, kw, i))
			}
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if arr, ok := obj[kw].([]any); ok {
			for i, s := range arr {
				l.schema(s, fmt.Sprintf("%s/%s/%d", path, kw, i))
			}
		}
	}
}

// bounds: the lower numeric bound must not exceed the upper one.
func (l *linter) bounds(obj map[string]any, path string) {
	type bound struct {
		kw        string
		v         *big.Rat
		exclusive bool
	}
	var lo, hi *bound
	for _, kw := range []string{"minimum", "exclusiveMinimum"} {
		if r := rat(obj[kw]); r != nil && (lo == nil || r.Cmp(lo.v) >= 0) {
			lo = &bound{kw, r, kw == "exclusiveMinimum"}
		}
	}
	for _, kw := range []string{"maximum", "exclusiveMaximum"} {
		if r := rat(obj[kw]); r != nil && (hi == nil || r.Cmp(hi.v) <= 0) {
			hi = &bound{kw, r, kw == "exclusiveMaximum"}
		}
	}
	if lo == nil || hi == nil {
		return
	}
	c := lo.v.Cmp(hi.v)
	if c > 0 || (c == 0 && (lo.exclusive || hi.exclusive)) {
		l.add(path+"/"+lo.kw, RuleMinAboveMax,
			fmt.Sprintf("%s %s leaves no number at or below %s %s", lo.kw, ratText(lo.v), hi.kw, ratText(hi.v)),
			fmt.Sprintf("swap or correct %s and %s", lo.kw, hi.kw))
	}
}

// pair: an integer lower bound keyword must not exceed its upper bound.
func (l *linter) pair(obj map[string]any, path, minKw, maxKw, rule, unit string) {
	lo, hi := rat(obj[minKw]), rat(obj[maxKw])
	if lo == nil || hi == nil || lo.Cmp(hi) <= 0 {
		return
	}
	l.add(path+"/"+minKw, rule,
		fmt.Sprintf("%s %s is above %s %s: no value has that many %s", minKw, ratText(lo), maxKw, ratText(hi), unit),
		fmt.Sprintf("lower %s or raise %s", minKw, maxKw))
}

// enumConstType: empty enum, const outside enum, const or enum values of a
// type the schema does not allow.
func (l *linter) enumConstType(obj map[string]any, path string) {
	types := typeList(obj["type"])
	enum, hasEnum := obj["enum"].([]any)
	if hasEnum && len(enum) == 0 {
		l.add(path+"/enum", RuleEmptyEnum, "enum is empty: no value can match",
			"list the allowed values, or remove enum")
	}
	cst, hasConst := obj["const"]
	if hasConst && hasEnum && len(enum) > 0 && !slices.ContainsFunc(enum, func(e any) bool { return jsonEqual(e, cst) }) {
		l.add(path+"/const", RuleConstNotInEnum,
			fmt.Sprintf("const %s is not one of the enum values", jsonText(cst)),
			"add the const value to enum, or drop one of the two keywords")
	}
	if len(types) == 0 {
		return
	}
	if hasConst && !typeAllows(types, cst) {
		l.add(path+"/const", RuleConstType,
			fmt.Sprintf("const %s is not of type %s", jsonText(cst), strings.Join(types, " or ")),
			"make const and type agree")
	}
	if hasEnum && len(enum) > 0 {
		var bad []string
		for _, e := range enum {
			if !typeAllows(types, e) {
				bad = append(bad, jsonText(e))
			}
		}
		switch {
		case len(bad) == len(enum):
			l.add(path+"/enum", RuleEnumType,
				fmt.Sprintf("no enum value is of type %s: no value can match", strings.Join(types, " or ")),
				"make the enum values and type agree")
		case len(bad) > 0:
			l.add(path+"/enum", RuleEnumType,
				fmt.Sprintf("enum values %s are not of type %s and can never match", strings.Join(bad, ", "), strings.Join(types, " or ")),
				"remove those values or widen type")
		}
	}
}

// requiredForbidden: a required property that additionalProperties: false
// (or a false property schema) forbids.
func (l *linter) requiredForbidden(obj map[string]any, path string) {
	req, ok := obj["required"].([]any)
	if !ok {
		return
	}
	props, _ := obj["properties"].(map[string]any)
	closed := false
	if b, ok := obj["additionalProperties"].(bool); ok && !b {
		closed = true
	}
	var patterns []*regexp.Regexp
	if pp, ok := obj["patternProperties"].(map[string]any); ok {
		for p := range pp {
			if re, err := regexp.Compile(p); err == nil {
				patterns = append(patterns, re)
			} else {
				closed = false // cannot tell; do not guess
			}
		}
	}
	for i, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		ptr := fmt.Sprintf("%s/required/%d", path, i)
		if ps, declared := props[name]; declared {
			if b, ok := ps.(bool); ok && !b {
				l.add(ptr, RuleRequiredForbidden,
					fmt.Sprintf("property %q is required but its schema is false", name),
					"give the property a schema, or stop requiring it")
			}
			continue
		}
		if !closed || slices.ContainsFunc(patterns, func(re *regexp.Regexp) bool { return re.MatchString(name) }) {
			continue
		}
		l.add(ptr, RuleRequiredForbidden,
			fmt.Sprintf("property %q is required but additionalProperties is false and it is not in properties", name),
			fmt.Sprintf("add %q to properties, or remove it from required", name))
	}
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func rat(v any) *big.Rat {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	return r
}

func typeList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func typeAllows(types []string, v any) bool {
	got := jsonTypeName(v)
	for _, t := range types {
		switch {
		case t == got:
			return true
		case t == "integer" && got == "number":
			if r := rat(v); r != nil && r.IsInt() {
				return true
			}
		}
	}
	return false
}

// jsonEqual compares decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, rb := rat(x), rat(y)
		return ra != nil && rb != nil && ra.Cmp(rb) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}
