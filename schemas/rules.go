package schemas

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// RuleCostLimit bounds the work of one evaluation of one x-rules rule, in
// CEL cost units (about one per operation and per element a macro visits).
// It is Kubernetes' per-expression limit for x-kubernetes-validations: a
// rule over it stops and is reported as a rule that errored.
const RuleCostLimit = 1_000_000

// Rule is one compiled x-rules entry of an object schema.
type Rule struct {
	// Index is the rule's position in its object's x-rules array; the
	// diagnostic's keyword is "x-rules/<Index>".
	Index int `json:"index"`
	// Rule is the CEL expression; self is the object.
	Rule string `json:"rule"`
	// Message is what a failure says ("" means the rule's text is quoted).
	Message string `json:"message,omitempty"`
	// Path is the JSON Pointer, relative to the object, that a failure is
	// reported at ("" is the object itself).
	Path string `json:"path,omitempty"`
	// Location is the schema location of the object schema holding the
	// rule (the validator's: file URL and JSON Pointer).
	Location string `json:"location,omitempty"`

	prg cel.Program
}

// Keyword is the diagnostic keyword of the rule: "x-rules/<index>", so
// the report's fingerprints tell the rules of one object apart.
func (r *Rule) Keyword() string { return fmt.Sprintf("%s/%d", KeywordRules, r.Index) }

// RuleError says that an x-rules rule does not compile: CEL's message, the
// rule and its index. It comes wrapped in the *CompileError naming the file.
type RuleError struct {
	Index int
	Rule  string
	// Err is CEL's message (the syntax or type error, with its column).
	Err string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("x-rules/%d: rule %q does not compile: %s", e.Index, e.Rule, e.Err)
}

// celEnv is the one CEL environment rules compile in: self is dynamic (any
// JSON value), with CEL's string, math, list and set extensions. It is
// built once, on the first schema with rules, and immutable after.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("self", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(), ext.Math(), ext.Lists(), ext.Sets(),
	)
})

// compileRules compiles an x-rules value (already checked against the
// vocabulary's metaschema: an array of {rule, message?, path?}).
func compileRules(v any) ([]*Rule, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("x-rules must be an array of {\"rule\": \"<CEL>\", \"message\": \"...\", \"path\": \"/field\"}")
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("creating the CEL environment: %w", err)
	}
	out := make([]*Rule, 0, len(list))
	for i, x := range list {
		obj, _ := x.(map[string]any)
		src, _ := obj["rule"].(string)
		r := &Rule{Index: i, Rule: src}
		r.Message, _ = obj["message"].(string)
		r.Path, _ = obj["path"].(string)
		if r.Path != "" && !strings.HasPrefix(r.Path, "/") {
			return nil, &RuleError{Index: i, Rule: src, Err: fmt.Sprintf("path %q is not a JSON Pointer (it starts with /)", r.Path)}
		}
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			return nil, &RuleError{Index: i, Rule: src, Err: oneLine(iss.Err().Error())}
		}
		if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
			return nil, &RuleError{Index: i, Rule: src, Err: "the rule gives " + t.String() + ", not a bool"}
		}
		r.prg, err = env.Program(ast, cel.CostLimit(RuleCostLimit), cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			return nil, &RuleError{Index: i, Rule: src, Err: oneLine(err.Error())}
		}
		out = append(out, r)
	}
	return out, nil
}

// selfActivation is the one variable of a rule.
type selfActivation struct{ self ref.Val }

func (a *selfActivation) ResolveName(name string) (any, bool) {
	if name == "self" {
		return a.self, true
	}
	return nil, false
}

func (a *selfActivation) Parent() interpreter.Activation { return nil }

// eval runs the rule on self (see node.celValue). It returns whether the
// rule holds, or why it could not say.
func (r *Rule) eval(self *selfActivation) (bool, error) {
	out, _, err := r.prg.Eval(self)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the rule gave %v (%s), not a bool", out.Value(), out.Type().TypeName())
	}
	return b, nil
}

// message is what a failure of the rule says.
func (r *Rule) message() string {
	if r.Message != "" {
		return r.Message
	}
	return "the rule " + r.Rule + " does not hold"
}
