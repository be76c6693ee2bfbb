package heal

import (
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/model"
)

// TestFilesKeptInHealTurns: the job's files go on the task's user turn of
// every request, heal requests included; the heal turns add only the
// output and the feedback.
func TestFilesKeptInHealTurns(t *testing.T) {
	t.Parallel()
	task := testTask(t)
	task.Input = ""
	task.Files = []model.File{{Name: "receipt.png", MediaType: "image/png", Size: 3, SHA256: "abc"}}
	m := &scripted{script: []reply{
		{content: `{"total":"x","currency":"EUR"}`},
		{content: `{"total":1,"currency":"EUR"}`},
	}}
	l, err := New(m, withAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	if res := l.Run(t.Context(), task); !res.OK() {
		t.Fatalf("Run: %s %s", res.Class, res.Reason)
	}
	if len(m.reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(m.reqs))
	}
	for i, r := range m.reqs {
		user := r.Messages[1]
		if len(user.Files) != 1 || user.Files[0].Name != "receipt.png" {
			t.Errorf("request %d: task turn files = %+v, want the receipt", i, user.Files)
		}
		if !strings.Contains(user.Content, "from the attached file.") || strings.Contains(user.Content, "Text:") {
			t.Errorf("request %d: task text %q does not point at the file", i, user.Content)
		}
		for k, msg := range r.Messages[2:] {
			if len(msg.Files) > 0 {
				t.Errorf("request %d: heal turn %d carries files", i, k)
			}
		}
	}
	if len(m.reqs[1].Messages) != 4 {
		t.Errorf("heal request has %d turns, want system, task, answer, feedback", len(m.reqs[1].Messages))
	}
}
