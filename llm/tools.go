package llm

import (
	"regexp"

	"github.com/llmpipeline/pipeline/heal"
)

// In tool mode (FormatTool) the model is forced to call one tool, named for
// the job's schema, whose parameters are the schema: the call's arguments
// are the answer. They go through the heal loop's sanitizer and validator
// like any answer; the provider's own checking of them is not trusted.

// toolDescription tells the model what the forced tool is for.
const toolDescription = "Record the data extracted from the text. The arguments are the one JSON object the schema describes: " +
	"use only information present in the text and leave out optional fields it does not give."

// schemaNameRe matches what may not appear in a schema or tool name
// (both providers accept ^[a-zA-Z0-9_-]{1,64}$).
var schemaNameRe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// toolName is the name a schema id takes as a json_schema or tool name:
// characters outside [a-zA-Z0-9_-] replaced, at most 64 long, "extraction"
// when nothing is left.
func toolName(schemaID string) string {
	name := schemaNameRe.ReplaceAllString(schemaID, "_")
	if name == "" {
		name = "extraction"
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// hasToolTurns reports whether a conversation carries a tool call (a heal
// turn after an answer that came as one).
func hasToolTurns(msgs []model.Message) bool {
	for _, m := range msgs {
		if m.ToolCallID != "" {
			return true
		}
	}
	return false
}

// finishOf normalises a finish or stop reason, where a forced tool call
// ending the turn ("tool_calls", "tool_use") is a normal stop.
func finishOf(raw string) string {
	switch raw {
	case "tool_calls", "tool_use":
		return model.FinishStop
	}
	return normaliseFinish(raw)
}
