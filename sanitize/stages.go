package sanitize

import "math/bits"

// Stage names, as recorded in Result.Stages. They are stable: the report counts
// them per schema and per model. Result.Stages lists them in this order.
const (
	StageBOM            = "bom"             // byte-order mark or zero-width characters removed
	StageUnicodeSpaces  = "unicode_spaces"  // non-ASCII spaces between tokens treated as whitespace
	StageThinking       = "thinking"        // <think>/<thinking>/<reasoning> blocks before the JSON dropped
	StageFence          = "fence"           // the value taken from a ``` or ~~~ code fence
	StageProse          = "prose"           // text before or after the value dropped
	StageDoubleEncoded  = "double_encoded"  // a JSON string holding JSON, or backslash-escaped JSON, decoded
	StageComments       = "comments"        // //, /* */ and # comments outside strings dropped
	StageTrailingCommas = "trailing_commas" // trailing, leading or doubled commas dropped
	StageMissingCommas  = "missing_commas"  // commas between members or elements inserted
	StageMissingColons  = "missing_colons"  // a colon between key and value inserted
	StageSingleQuotes   = "single_quotes"   // 'single-quoted' strings and keys
	StageSmartQuotes    = "smart_quotes"    // typographic quotes or backticks used as quotes
	StageUnquotedKeys   = "unquoted_keys"   // bare object keys quoted
	StageUnquotedValues = "unquoted_values" // bare words and malformed numbers quoted as strings, spelling kept
	StageLiterals       = "literals"        // True/False/None, NaN/Infinity/undefined
	StageNumbers        = "numbers"         // .5 → 0.5 (a leading zero added, nothing else)
	StageFunctionCalls  = "function_calls"  // ObjectId("x"), NumberLong(2): the wrapper dropped
	StageConcatenation  = "concatenation"   // "a" + "b" joined
	StageInnerQuotes    = "inner_quotes"    // unescaped " inside a string escaped
	StageControlChars   = "control_chars"   // raw newlines, tabs, control characters in strings escaped
	StageEscapes        = "escapes"         // invalid escapes such as \' or \d fixed
)

// stageNames is indexed by stage bit; the order is the order of Result.Stages.
var stageNames = [...]string{
	StageBOM, StageUnicodeSpaces, StageThinking, StageFence, StageProse, StageDoubleEncoded,
	StageComments, StageTrailingCommas, StageMissingCommas, StageMissingColons,
	StageSingleQuotes, StageSmartQuotes, StageUnquotedKeys, StageUnquotedValues,
	StageLiterals, StageNumbers, StageFunctionCalls, StageConcatenation,
	StageInnerQuotes, StageControlChars, StageEscapes,
}

// stage bits, same order as stageNames.
const (
	sBOM uint32 = 1 << iota
	sUnicodeSpaces
	sThinking
	sFence
	sProse
	sDoubleEncoded
	sComments
	sTrailingCommas
	sMissingCommas
	sMissingColons
	sSingleQuotes
	sSmartQuotes
	sUnquotedKeys
	sUnquotedValues
	sLiterals
	sNumbers
	sFunctionCalls
	sConcatenation
	sInnerQuotes
	sControlChars
	sEscapes
)

// Stages returns every stage name Clean can record, in the order Result.Stages
// lists them.
func Stages() []string {
	out := make([]string, len(stageNames))
	copy(out, stageNames[:])
	return out
}

func stageList(mask uint32) []string {
	if mask == 0 {
		return nil
	}
	out := make([]string, 0, bits.OnesCount32(mask))
	for i, name := range stageNames {
		if mask&(1<<uint(i)) != 0 {
			out = append(out, name)
		}
	}
	return out
}
