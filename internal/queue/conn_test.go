package queue

import (
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
)

func TestSubmitCountsDuplicates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		unique    int
		repeats   int // items submitted a second time
		wantStore int
	}{
		{name: "none", unique: 0},
		{name: "unique", unique: 50},
		{name: "with duplicates", unique: 40, repeats: 15},
		{name: "past stall bound", unique: broker.PublishAsyncMaxPending + 500, repeats: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			items := jobItems("sub", "invoice", tc.unique)
			items = append(items, items[:tc.repeats]...)
			var calls, last int
			st, err := Submit(t.Context(), c, items, func(done int) { calls++; last = done })
			if err != nil {
				t.Fatal(err)
			}
			if st.Published != tc.unique || st.Duplicates != tc.repeats {
				t.Errorf("stats = %+v; want %d published, %d duplicates", st, tc.unique, tc.repeats)
			}
			if calls != len(items) || last != len(items) {
				t.Errorf("progress called %d times, last %d; want %d", calls, last, len(items))
			}
			p, err := Pending(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if p.Jobs != uint64(tc.unique) {
				t.Errorf("JOBS holds %d, want %d", p.Jobs, tc.unique)
			}
		})
	}
}

func TestSubmitRejectsBadItems(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	cases := []struct {
		name string
		item SubmitItem
	}{
		// "a.b" and ">" are schema ids (their subject tokens escape them).
		{"schema with a control character", SubmitItem{Data: []byte("{}"), Schema: "a\tb", MsgID: "x"}},
		{"no schema", SubmitItem{Data: []byte("{}"), MsgID: "x"}},
		{"no msg id", SubmitItem{Data: []byte("{}"), Schema: "invoice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Submit(t.Context(), c, []SubmitItem{tc.item}, nil); err == nil {
				t.Error("Submit accepted it")
			}
		})
	}
}
