package broker

import (
	"testing"
)

// What one process remembers of a provider's limits is read by the next
// process on the same data dir after the first has gone (a restart); a
// key it never wrote holds nothing; a key that is not a KV token is an
// error naming it.
func TestProviderLimitsOutliveTheProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	a := newConn(t, func(c *Config) { c.DataDir = dir })
	pa, err := a.ProviderLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := pa.Get(ctx, "k1"); ok || err != nil {
		t.Fatalf("before any write: %v, %v; want nothing", ok, err)
	}
	want := `{"headers":true,"requests_per_minute":500}`
	if err := pa.Put(ctx, "k1", []byte(want)); err != nil {
		t.Fatal(err)
	}
	a.Close()

	b := newConn(t, func(c *Config) { c.DataDir = dir })
	pb, err := b.ProviderLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := pb.Get(ctx, "k1"); err != nil || !ok || string(got) != want {
		t.Errorf("after a restart: %q, %v, %v; want %s", got, ok, err, want)
	}
	if _, ok, err := pb.Get(ctx, "k2"); ok || err != nil {
		t.Errorf("another key: %v, %v; want nothing", ok, err)
	}
	if err := pb.Put(ctx, "k.1", []byte(want)); err == nil {
		t.Error("a key with a dot: no error")
	}
}
