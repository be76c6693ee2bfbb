package sim

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// testSchema is a schema file under testdata, raw and compiled by an
// independent validator (formats asserted).
type testSchema struct {
	name string
	raw  []byte
	sch  *jsonschema.Schema
}

func loadSchema(t testing.TB, name string) testSchema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return compileTestSchema(t, name, raw)
}

func compileTestSchema(t testing.TB, name string, raw []byte) testSchema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	return testSchema{name: name, raw: raw, sch: sch}
}

// diagnostics validates JSON text and returns the failing leaves as
// "path keyword" pairs, sorted; nil when valid. A required failure names the
// missing property, as the heal loop's diagnostics do.
func (s testSchema) diagnostics(t testing.TB, out string) []diag {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	err = s.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("validate: %v", err)
	}
	var ds []diag
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := pointer(e.InstanceLocation)
		kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
		if r, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range r.Missing {
				ds = append(ds, diag{path: path + "/" + m, keyword: "required"})
			}
			return
		}
		ds = append(ds, diag{path: path, keyword: kw})
	}
	walk(ve)
	sort.Slice(ds, func(i, j int) bool { return ds[i].path+ds[i].keyword < ds[j].path+ds[j].keyword })
	return ds
}

type diag struct{ path, keyword string }

func pointer(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// feedback renders diagnostics the way the heal loop shows them to the model.
func feedback(ds []diag) string {
	var b strings.Builder
	b.WriteString("Your output did not match the schema. Fix only these fields and return the whole JSON object:\n")
	for _, d := range ds {
		b.WriteString("- " + d.path + ": expected a valid value (" + d.keyword + "), got something else\n")
	}
	return b.String()
}
