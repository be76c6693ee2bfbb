package cluster

import (
	"strings"
	"testing"
)

func TestPathPattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"/items/2/price", "/items/*/price"},
		{"/items/10/tags/0", "/items/*/tags/*"},
		{"/0", "/*"},
		{"/total", "/total"},
		{"/a1/b2", "/a1/b2"},
		{"/items//0", "/items//*"},
		{"/x~1y/3", "/x~1y/*"},
		{"/items/-", "/items/-"},
		{"items/3", "items/*"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			if got := PathPattern(tc.in); got != tc.want {
				t.Errorf("PathPattern(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzPathPattern(f *testing.F) {
	for _, s := range []string{"/items/2/price", "", "/0/1/2", "a/1", "/x~0/99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := PathPattern(p)
		if again := PathPattern(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", p, got, again)
		}
		if strings.Count(got, "/") != strings.Count(p, "/") {
			t.Fatalf("segments changed: %q -> %q", p, got)
		}
	})
}

func TestID(t *testing.T) {
	t.Parallel()
	base := Fingerprint{Schema: "invoice", Version: "v1", Path: "/items/*/price", Keyword: "type"}
	id := ID(base)
	if len(id) != 12 {
		t.Fatalf("ID = %q, want 12 hex digits", id)
	}
	concrete := base
	concrete.Path = "/items/5/price"
	if ID(concrete) != id {
		t.Errorf("a concrete pointer and its pattern get different ids")
	}
	for name, fp := range map[string]Fingerprint{
		"schema":  {Schema: "receipt", Version: "v1", Path: base.Path, Keyword: "type"},
		"version": {Schema: "invoice", Version: "v2", Path: base.Path, Keyword: "type"},
		"path":    {Schema: "invoice", Version: "v1", Path: "/items/*/qty", Keyword: "type"},
		"keyword": {Schema: "invoice", Version: "v1", Path: base.Path, Keyword: "minimum"},
		"shifted": {Schema: "invoice\x00v1", Version: "", Path: base.Path, Keyword: "type"},
	} {
		if ID(fp) == id {
			t.Errorf("changing %s keeps the id", name)
		}
	}
}

func BenchmarkID(b *testing.B) {
	fp := Fingerprint{Schema: "invoice", Version: "3f9a1c0d", Path: "/items/12/price", Keyword: "type"}
	b.ReportAllocs()
	for b.Loop() {
		ID(fp)
	}
}
