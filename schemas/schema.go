package schemas

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/schemas/internal/fastpath"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/message"
)

//go:embed builtin/*.json
var builtinFS embed.FS

// Schema is one compiled JSON Schema. It is immutable after Compile and safe
// for concurrent use by many goroutines.
type Schema struct {
	// ID is the schema id: the file name without .json or .schema.json.
	ID string
	// Version is a short hex hash (12 characters) of Raw, the canonical
	// text, which covers the files in Uses.
	Version string
	// File is the file the schema was loaded from ("builtin/<id>.json" for
	// the embedded examples, "" when compiled from bytes).
	File string
	// Raw is the canonical schema text: keys sorted, no insignificant
	// whitespace. It is what providers and prompts receive. For a schema
	// that references other files (Uses), they are inlined under $defs
	// (definitions before draft 2019-09) by file name, with the $refs
	// rewritten to local pointers, so the text stands alone; where that
	// rewrite does not apply (anchors, nested $ids, dynamic refs), Raw is
	// the file's own text.
	Raw json.RawMessage
	// Uses lists the other files of the schema directory that the schema
	// references, directly or not, by file name, sorted. Version covers
	// them.
	Uses []string
	// Title and Description are the schema's top-level annotations (they go
	// into prompts).
	Title       string
	Description string

	compiled *jsonschema.Schema
	// subs maps every compiled subschema's location to it, so a validation
	// error's schema location can be turned into what the schema expects.
	subs    map[string]*jsonschema.Schema
	printer *message.Printer
	// fast accepts most valid documents without the general validator
	// (package schemas/internal/fastpath); nil when the root uses a
	// keyword it does not decide.
	fast *fastpath.Checker
	// truth: some subschema carries x-grounded or x-rules (truth.go);
	// rules lists the x-rules.
	truth bool
	rules []Rule
}

// Registry is a set of compiled schemas by id. It is read-only after Load
// and safe for concurrent use.
type Registry struct {
	schemas map[string]*Schema
	// broken holds the files that did not load, by file.
	broken map[string]*CompileError
}

// CompileError says which schema file did not load and why: its name is
// not a valid id (*NameError), it is over a limit (*LimitError), it does
// not parse, a reference does not resolve (*RefError), or it does not
// compile.
type CompileError struct {
	ID   string
	File string
	Err  error
	// Findings are the static lint findings for the file, which often name
	// the real cause (an empty enum, a bad pattern).
	Findings []Finding
}

func (e *CompileError) Error() string {
	where := e.File
	if where == "" {
		where = e.ID
	}
	s := fmt.Sprintf("loading schema %s: %v", where, e.Err)
	for _, f := range e.Findings {
		s += fmt.Sprintf("; lint %s at %s: %s", f.Rule, f.Path, f.Message)
	}
	return s
}

func (e *CompileError) Unwrap() error { return e.Err }

// NewRegistry builds a registry from compiled schemas; a repeated id is an
// error.
func NewRegistry(ss ...*Schema) (*Registry, error) {
	r := &Registry{schemas: make(map[string]*Schema, len(ss)), broken: map[string]*CompileError{}}
	for _, s := range ss {
		if _, dup := r.schemas[s.ID]; dup {
			return nil, fmt.Errorf("building registry: schema id %q given twice", s.ID)
		}
		r.schemas[s.ID] = s
	}
	return r, nil
}

// Canonical returns the canonical text of a JSON document: object keys
// sorted, no insignificant whitespace, numbers as written, no HTML escaping.
func Canonical(raw []byte) ([]byte, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return canonicalOf(doc)
}

// canonicalOf encodes a parsed document (jsonschema.UnmarshalJSON's
// json.Numbers keep the numbers as written) in canonical form.
func canonicalOf(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// VersionOf returns the version hash of canonical schema text.
func VersionOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:12]
}

// Compile parses and compiles one schema. The default draft is 2020-12;
// formats are asserted; references outside the document are refused (no file
// or network access); the default limits of Config apply.
func Compile(id string, raw []byte) (*Schema, error) {
	if id == "" {
		return nil, errors.New("compiling schema: empty id")
	}
	res, err := parseResource(raw, id, Config{}.withDefaults())
	if err != nil {
		return nil, &CompileError{ID: id, Err: err}
	}
	d := newSchemaDir("mem:///", "")
	name := id + ".json"
	d.add(name, res)
	return d.compile(id, name)
}

// indexSubschemas records every subschema reachable from sch by location.
func indexSubschemas(sch *jsonschema.Schema, into map[string]*jsonschema.Schema) {
	if sch == nil {
		return
	}
	if _, seen := into[sch.Location]; seen {
		return
	}
	into[sch.Location] = sch
	walk := func(ss ...*jsonschema.Schema) {
		for _, x := range ss {
			indexSubschemas(x, into)
		}
	}
	walk(sch.Ref, sch.RecursiveRef, sch.Not, sch.If, sch.Then, sch.Else, sch.PropertyNames,
		sch.UnevaluatedProperties, sch.Contains, sch.Items2020, sch.UnevaluatedItems, sch.ContentSchema)
	if sch.DynamicRef != nil {
		walk(sch.DynamicRef.Ref)
	}
	walk(sch.AllOf...)
	walk(sch.AnyOf...)
	walk(sch.OneOf...)
	walk(sch.PrefixItems...)
	for _, x := range sch.Properties {
		walk(x)
	}
	for _, x := range sch.PatternProperties {
		walk(x)
	}
	for _, x := range sch.DependentSchemas {
		walk(x)
	}
	for _, x := range sch.Dependencies {
		if d, ok := x.(*jsonschema.Schema); ok {
			walk(d)
		}
	}
	for _, x := range []any{sch.AdditionalProperties, sch.Items, sch.AdditionalItems} {
		switch v := x.(type) {
		case *jsonschema.Schema:
			walk(v)
		case []*jsonschema.Schema:
			walk(v...)
		}
	}
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
