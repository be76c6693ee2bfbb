package broker

import (
	"slices"
	"testing"
)

// A refusal one process records is read by another on the same server
// (the KV bucket PIPELINE_PARAMS); another model's key holds none; a key
// that is not a KV token is an error naming it.
func TestModelParamsShared(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newConn(t, func(c *Config) { c.DataDir = dir })
	b := newConn(t, func(c *Config) { c.DataDir = dir })
	ctx := t.Context()
	pa, err := a.ModelParams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.ModelParams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pb.Refused(ctx, "m1"); err != nil || len(got) != 0 {
		t.Fatalf("before any refusal: %v, %v", got, err)
	}
	for _, p := range []string{"temperature", "max_tokens", "temperature"} {
		if err := pa.Refuse(ctx, "m1", p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := pb.Refused(ctx, "m1")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"max_tokens", "temperature"}) {
		t.Errorf("read by the other process: %v, %v; want max_tokens and temperature", got, err)
	}
	if got, err := pb.Refused(ctx, "m2"); err != nil || len(got) != 0 {
		t.Errorf("another model: %v, %v; want none", got, err)
	}
	if err := pa.Refuse(ctx, "m.1", "temperature"); err == nil {
		t.Error("a key with a dot: no error")
	}
}
