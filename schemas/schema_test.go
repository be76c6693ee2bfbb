package schemas

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuiltin(t *testing.T) {
	t.Parallel()
	r, err := Builtin()
	if err != nil {
		t.Fatalf("Builtin: %v", err)
	}
	if got, want := r.IDs(), []string{"invoice", "shipment", "ticket"}; !slices.Equal(got, want) {
		t.Fatalf("IDs = %v, want %v", got, want)
	}
	for _, id := range r.IDs() {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			s, ok := r.Get(id)
			if !ok {
				t.Fatal("Get: not found")
			}
			if s.Title == "" || s.Description == "" {
				t.Errorf("schema %s lacks title or description", id)
			}
			if s.File != "builtin/"+id+".json" {
				t.Errorf("File = %q", s.File)
			}
			if len(s.Version) != 12 {
				t.Errorf("Version = %q, want 12 hex characters", s.Version)
			}
			if f := Lint(s); len(f) != 0 {
				t.Errorf("built-in schema has lint findings: %v", f)
			}
		})
	}
	ship, _ := r.Get("shipment")
	ds, _, err := ship.Validate([]byte(`{"carrier":"UPS","tracking_code":"1Z 999 AA1 01 2345 6784","ship_date":"2024-05-02","destination":{"city":"Lyon","country":"FR"},"packages":1}`), 0)
	if err != nil || len(ds) != 1 || ds[0].Path != "/tracking_code" || ds[0].Keyword != "pattern" {
		t.Errorf("shipment tracking_code pattern: got %v, %v", ds, err)
	}
	if _, ok := r.Get("nope"); ok {
		t.Error("Get(nope) found something")
	}
	empty, err := Load("")
	if err != nil || !slices.Equal(empty.IDs(), r.IDs()) {
		t.Errorf(`Load("") = %v, %v; want the built-ins`, empty.IDs(), err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	okSchema := `{"type":"object","properties":{"a":{"type":"string"}}}`
	tests := []struct {
		name    string
		files   map[string]string
		wantIDs []string
		wantErr []string // substrings of the error
	}{
		{
			name:    "ids from file names",
			files:   map[string]string{"a.json": okSchema, "b.schema.json": okSchema, "notes.txt": "x", "README.md": "# hi"},
			wantIDs: []string{"a", "b"},
		},
		{
			name:    "empty dir",
			files:   map[string]string{},
			wantIDs: []string{},
		},
		{
			name:    "same id twice",
			files:   map[string]string{"a.json": okSchema, "a.schema.json": okSchema},
			wantErr: []string{"a.json", "a.schema.json", `"a"`},
		},
		{
			name:    "not JSON names the file",
			files:   map[string]string{"good.json": okSchema, "bad.json": `{"type": "object",`},
			wantIDs: []string{"good"},
			wantErr: []string{"bad.json", "parsing JSON"},
		},
		{
			name:    "does not compile names the file and reason",
			files:   map[string]string{"broken.json": `{"type":"objekt"}`},
			wantErr: []string{"broken.json", "/type", "metaschema"},
		},
		{
			name:    "bad pattern",
			files:   map[string]string{"re.json": `{"pattern":"(unclosed"}`},
			wantErr: []string{"re.json", "pattern"},
		},
		{
			name:    "empty enum under draft-07 mentions the lint finding",
			files:   map[string]string{"e.json": `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"c":{"enum":[]}}}`},
			wantErr: []string{"e.json", "empty_enum", "/properties/c/enum"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := writeFiles(t, tt.files)
			r, err := Load(dir)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := r.IDs(); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("IDs = %v, want %v", got, tt.wantIDs)
			}
			if len(tt.wantErr) > 0 {
				err := r.Err()
				if err == nil {
					t.Fatalf("Registry.Err: want error, got ids %v", r.IDs())
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err := r.Err(); err != nil {
				t.Fatalf("Registry.Err: %v", err)
			}
			for _, id := range tt.wantIDs {
				s, _ := r.Get(id)
				if !strings.HasPrefix(s.File, dir) {
					t.Errorf("File = %q, want under %s", s.File, dir)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load(missing dir): want error")
	}
}

func TestCompileErrorType(t *testing.T) {
	t.Parallel()
	_, err := Compile("x", []byte(`{"minimum":"zero"}`))
	var ce *CompileError
	if !errors.As(err, &ce) || ce.ID != "x" || ce.Err == nil {
		t.Fatalf("Compile: got %v, want a *CompileError for x", err)
	}
	if _, err := Compile("", []byte(`{}`)); err == nil {
		t.Error("Compile with empty id: want error")
	}
	if _, err := Compile("arr", []byte(`[1]`)); err == nil || !strings.Contains(err.Error(), "array") {
		t.Errorf("Compile([1]) = %v, want an error naming the array", err)
	}
}

func TestCompileRefusesExternalRefs(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"other.json": `{"type":"string"}`})
	raw := `{"$ref":"file://` + filepath.ToSlash(filepath.Join(dir, "other.json")) + `"}`
	if _, err := Compile("ext", []byte(raw)); err == nil {
		t.Error("Compile with a file reference: want error (no file access)")
	}
	if _, err := Compile("net", []byte(`{"$ref":"https://example.com/s.json"}`)); err == nil {
		t.Error("Compile with a network reference: want error")
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	a := mustCompile(t, "a", `{"type":"object","properties":{"x":{"type":"number","minimum":1.50}}}`)
	b := mustCompile(t, "b", "{\n  \"properties\": {\"x\": {\"minimum\": 1.50, \"type\": \"number\"}},\n  \"type\": \"object\"\n}\n")
	c := mustCompile(t, "a", `{"type":"object","properties":{"x":{"type":"number","minimum":2}}}`)
	if a.Version != b.Version {
		t.Errorf("same schema, different layout: %s != %s", a.Version, b.Version)
	}
	if a.Version == c.Version {
		t.Errorf("different schemas, same version %s", a.Version)
	}
	if string(a.Raw) != string(b.Raw) {
		t.Errorf("canonical text differs:\n%s\n%s", a.Raw, b.Raw)
	}
	if want := `{"properties":{"x":{"minimum":1.50,"type":"number"}},"type":"object"}`; string(a.Raw) != want {
		t.Errorf("Raw = %s, want %s", a.Raw, want)
	}
	h := mustCompile(t, "h", `{"description":"a <b> & c"}`)
	if !strings.Contains(string(h.Raw), "<b> & c") {
		t.Errorf("canonical text escapes HTML: %s", h.Raw)
	}
}

func TestNewRegistry(t *testing.T) {
	t.Parallel()
	a := mustCompile(t, "a", `{}`)
	b := mustCompile(t, "b", `{}`)
	r, err := NewRegistry(b, a)
	if err != nil || !slices.Equal(r.IDs(), []string{"a", "b"}) {
		t.Fatalf("NewRegistry = %v, %v", r, err)
	}
	if _, err := NewRegistry(a, a); err == nil {
		t.Error("NewRegistry with a repeated id: want error")
	}
}

func TestIDFromFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
		ok       bool
	}{
		{"invoice.json", "invoice", true},
		{"invoice.schema.json", "invoice", true},
		{"dir/x.json", "x", true},
		{".json", "", false},
		{"a.yaml", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, ok := IDFromFile(tt.name)
			if id != tt.id || ok != tt.ok {
				t.Errorf("IDFromFile(%q) = %q, %v; want %q, %v", tt.name, id, ok, tt.id, tt.ok)
			}
		})
	}
}

// TestDraft07AndID: draft-07 "#/definitions" references resolve, a schema
// with its own absolute $id compiles without network access, and
// diagnostics still find what the referenced schema expects.
func TestDraft07AndID(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "d7", `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"$id": "https://schemas.example.com/order.json",
		"definitions": {"qty": {"type": "integer", "minimum": 1}},
		"type": "object",
		"properties": {"lines": {"type": "array", "items": {"$ref": "#/definitions/qty"}}}
	}`)
	ds, _, err := s.Validate([]byte(`{"lines":[1,0,"2"]}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := Lines(ds, 0); got != "- /lines/1: expected integer >= 1, got 0\n- /lines/2: expected integer >= 1, got \"2\"" {
		t.Errorf("diagnostics:\n%s", got)
	}
}
