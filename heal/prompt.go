package heal

import (
	"fmt"
	"strings"

	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// Task is one job as the loop sees it.
type Task struct {
	JobID  string
	Schema *schemas.Schema
	// Input is the text to extract from; Instructions optional extra
	// guidance from the job.
	Input, Instructions string
	// Files are the job's images and PDFs: they go on the task's user
	// turn, before its text, and stay there in every heal request.
	Files []model.File
	// Part: the job is one chunk of a longer document. A rule of the
	// schema (x-rules) that cannot be evaluated on its answer, such as one
	// naming a field another chunk reads, is left to the document's merge
	// instead of failing the chunk.
	Part bool
}

// Messages returns the original task as a fresh slice: a system turn with
// the rules and the schema, a user turn with the text. Every heal request
// starts with exactly these turns.
func Messages(t Task) []model.Message {
	return taskMessages(t, systemTurn(t.Schema))
}

// systemTurn is the rules and the schema. It depends on the schema alone,
// so the loop builds it once per schema (see Loop.system).
func systemTurn(s *schemas.Schema) string {
	var sys strings.Builder
	if s != nil {
		sys.Grow(512 + len(s.ID) + len(s.Title) + len(s.Description) + len(s.Raw))
	}
	sys.WriteString("You extract structured data from text. Answer with exactly one JSON object that validates " +
		"against the JSON Schema below, and nothing else: no prose, no Markdown, no code fences. " +
		"Use only information present in the text; leave out optional fields the text does not give.")
	if s != nil {
		fmt.Fprintf(&sys, "\n\nSchema %q", s.ID)
		if s.Title != "" {
			fmt.Fprintf(&sys, " (%s)", s.Title)
		}
		if s.Description != "" {
			fmt.Fprintf(&sys, ": %s", s.Description)
		}
		sys.WriteString("\n")
		sys.Write(s.Raw)
		if s.HasChecks() {
			sys.WriteString("\n\nA string marked \"x-grounded\": true (or any string below an object or array so marked) " +
				"must be quoted from the text exactly; use null when the text does not give it. " +
				"Each \"x-rules\" entry is a CEL expression over the object (self) that must hold.")
		}
	}
	return sys.String()
}

// taskMessages is the original task with a given system turn: a fresh
// slice every time. The user turn is built in one sized buffer.
func taskMessages(t Task, system string) []model.Message {
	title := "the data"
	if t.Schema != nil && t.Schema.Title != "" {
		title = "the " + t.Schema.Title
	}
	ins := strings.TrimSpace(t.Instructions)
	var user strings.Builder
	user.Grow(64 + len(title) + len(ins) + len(t.Input))
	user.WriteString("Extract ")
	user.WriteString(title)
	switch {
	case len(t.Files) == 0:
		user.WriteString(" from the text below.")
	case t.Input == "":
		user.WriteString(" from the attached " + filesWord(len(t.Files)) + ".")
	default:
		user.WriteString(" from the attached " + filesWord(len(t.Files)) + " and the text below.")
	}
	if ins != "" {
		user.WriteString("\nAdditional instructions: ")
		user.WriteString(ins)
	}
	if len(t.Files) == 0 || t.Input != "" {
		user.WriteString("\n\nText:\n")
		user.WriteString(t.Input)
	}
	return []model.Message{
		{Role: model.RoleSystem, Content: system},
		{Role: model.RoleUser, Content: user.String(), Files: t.Files},
	}
}

func filesWord(n int) string {
	if n == 1 {
		return "file"
	}
	return "files"
}

// failedTurn is one failed attempt as it goes back to the model.
type failedTurn struct {
	raw      string
	feedback string
	// toolCallID is the id of the tool call that carried raw ("" for a
	// text answer): the feedback then goes back as that call's result.
	toolCallID string
}

// conversation builds a request's messages: a fresh copy of the task turns,
// then per carried failed attempt its output (assistant) and the feedback
// (user), both marked with the attempt's tool call id when the answer came
// as a tool call. Nothing of base or turns is shared with the result.
func conversation(base []model.Message, turns []failedTurn, h History) []model.Message {
	if h != HistoryAll && len(turns) > 1 {
		turns = turns[len(turns)-1:]
	}
	msgs := make([]model.Message, 0, len(base)+2*len(turns))
	msgs = append(msgs, base...)
	for _, t := range turns {
		msgs = append(msgs,
			model.Message{Role: model.RoleAssistant, Content: t.raw, ToolCallID: t.toolCallID},
			model.Message{Role: model.RoleUser, Content: t.feedback, ToolCallID: t.toolCallID})
	}
	return msgs
}

// schemaFeedback is the heal turn for schema diagnostics.
func schemaFeedback(lines string) string {
	return "Your previous answer does not validate against the schema. Fix only these fields, keep every other " +
		"field as it was, and return the whole corrected JSON object with no other text:\n" + lines
}

// grammarFeedback is the heal turn for output with no parsable JSON.
func grammarFeedback(reason string) string {
	return "Your previous answer could not be parsed as JSON (" + reason + "). Return the whole JSON object " +
		"that validates against the schema, and nothing else: no prose, no code fences, no comments."
}
