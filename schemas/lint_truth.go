package schemas

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	celast "github.com/google/cel-go/common/ast"
)

// Lint rules of the truth keywords.
const (
	RuleGroundedNonString = "grounded_non_string" // x-grounded on a number, boolean or null
	RuleRuleUnknownField  = "rule_unknown_property"
)

// truth lints the x-grounded and x-rules of one schema object.
func (l *linter) truth(obj map[string]any, path string) {
	if g, _ := obj[KeywordGrounded].(bool); g {
		if types := typeList(obj["type"]); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool {
			return t == "string" || t == "object" || t == "array"
		}) {
			l.add(path+"/"+KeywordGrounded, RuleGroundedNonString,
				fmt.Sprintf("x-grounded on a value of type %s: only strings are looked for in the input", strings.Join(types, " or ")),
				"drop x-grounded here (numbers and booleans are not grounded), or put it on the string fields")
		}
	}
	list, _ := obj[KeywordRules].([]any)
	for i, x := range list {
		r, _ := x.(map[string]any)
		src, _ := r["rule"].(string)
		for _, name := range l.unknownFields(obj, src) {
			l.add(fmt.Sprintf("%s/%s/%d", path, KeywordRules, i), RuleRuleUnknownField,
				fmt.Sprintf("the rule %s names %s, which the schema does not define", src, name),
				"define the property in the object's properties, or fix the rule's spelling")
		}
	}
}

// unknownFields returns the self.<a>.<b> chains of a rule that name a
// property the object schema does not define: a property not in
// properties (nor matched by patternProperties) of an object schema that
// lists properties. A rule that does not parse is the loader's to report.
func (l *linter) unknownFields(obj map[string]any, src string) []string {
	env, err := celEnv()
	if err != nil {
		return nil
	}
	ast, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil
	}
	var out []string
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		chain, ok := selfChain(e)
		if !ok {
			return
		}
		s := obj
		for k, name := range chain {
			if s == nil {
				return
			}
			props, hasProps := s["properties"].(map[string]any)
			if !hasProps || definedBy(s, props, name) {
				next, _ := props[name].(map[string]any)
				if next != nil && next["type"] != nil && !slices.Contains(typeList(next["type"]), "object") {
					return // self.a.b on a non-object: the type checker's business
				}
				s = next
				continue
			}
			if f := "self." + strings.Join(chain[:k+1], "."); !slices.Contains(out, f) {
				out = append(out, f)
			}
			return
		}
	}))
	return out
}

// definedBy reports whether an object schema defines a property name.
func definedBy(s, props map[string]any, name string) bool {
	if _, ok := props[name]; ok {
		return true
	}
	if pp, ok := s["patternProperties"].(map[string]any); ok {
		for p := range pp {
			if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
				return true
			}
		}
	}
	return false
}

// selfChain returns the field names of a select chain rooted at self
// (self.a.b: a, b), only for the outermost select of the chain.
func selfChain(e celast.Expr) ([]string, bool) {
	if e.Kind() != celast.SelectKind {
		return nil, false
	}
	var names []string
	for e.Kind() == celast.SelectKind {
		sel := e.AsSelect()
		names = append(names, sel.FieldName())
		e = sel.Operand()
	}
	if e.Kind() != celast.IdentKind || e.AsIdent() != "self" {
		return nil, false
	}
	slices.Reverse(names)
	return names, true
}
