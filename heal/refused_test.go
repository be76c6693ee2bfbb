package heal

import (
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
)

func TestRefusalEndsTheJob(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("I can't help with that. ", 100)
	tests := []struct {
		name, content, refusal, wantRaw string
	}{
		{"refusal alone", "", "I can't help with extracting that.", "I can't help with extracting that."},
		{"refusal with partial text", `{"total": 1`, "stop_reason refusal", `{"total": 1`},
		{"long refusal", "", long, long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &scripted{script: []reply{
				{content: tt.content, refusal: tt.refusal, usage: model.Usage{PromptTokens: 90, CompletionTokens: 4}},
				{content: `{"total": 12.5, "currency": "EUR"}`},
			}}
			loop, err := New(m, Config{MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			res := loop.Run(t.Context(), testTask(t))
			if res.Class != job.ClassRefused || len(m.reqs) != 1 || len(res.Attempts) != 1 {
				t.Fatalf("class %q, %d calls, %d attempts; want refused after one call", res.Class, len(m.reqs), len(res.Attempts))
			}
			a := res.Attempts[0]
			if a.Class != job.ClassRefused || a.Raw != tt.wantRaw || a.Usage.PromptTokens != 90 || len(a.Stages) != 0 {
				t.Errorf("attempt %+v", a)
			}
			if !strings.HasPrefix(res.Reason, "attempt 1: the model refused: "+tt.refusal[:10]) || len(res.Reason) > maxRefusalReason+100 {
				t.Errorf("reason %q", res.Reason)
			}
			if !strings.Contains(res.Hint, "never healed or retried") {
				t.Errorf("hint %q", res.Hint)
			}
		})
	}
}

// The tool call id of a failed answer marks both heal turns, so the
// provider can send them as the tool call and its result.
func TestToolCallIDGoesBackOnTheHealTurn(t *testing.T) {
	t.Parallel()
	m := &scripted{script: []reply{
		{content: `{"total": "12,50", "currency": "EUR"}`, toolCallID: "call_1"},
		{content: `{"total": -1, "currency": "EUR"}`, toolCallID: "call_2"},
		{content: `{"total": 12.5, "currency": "EUR"}`, toolCallID: "call_3"},
	}}
	loop, err := New(m, Config{MaxAttempts: 3, History: HistoryAll})
	if err != nil {
		t.Fatal(err)
	}
	if res := loop.Run(t.Context(), testTask(t)); !res.OK() {
		t.Fatalf("result %+v", res)
	}
	var got []string
	for _, msg := range m.reqs[2].Messages {
		got = append(got, msg.Role+":"+msg.ToolCallID)
	}
	want := "system:,user:,assistant:call_1,user:call_1,assistant:call_2,user:call_2"
	if strings.Join(got, ",") != want {
		t.Fatalf("turns %s, want %s", strings.Join(got, ","), want)
	}
	if m.reqs[0].Messages[1].ToolCallID != "" {
		t.Error("the task turns carry a tool call id")
	}
}

func TestUsageAddsCacheWrites(t *testing.T) {
	t.Parallel()
	r := Result{Attempts: []Attempt{
		{N: 1, Usage: model.Usage{PromptTokens: 1540, CacheWriteTokens: 1500}},
		{N: 2, Usage: model.Usage{PromptTokens: 1660, CachedTokens: 1500}},
	}}
	if u := r.Usage(); u.CacheWriteTokens != 1500 || u.CachedTokens != 1500 || u.PromptTokens != 3200 {
		t.Errorf("usage %+v", u)
	}
	if u := r.HealUsage(); u.CacheWriteTokens != 0 || u.CachedTokens != 1500 {
		t.Errorf("heal usage %+v", u)
	}
}
