package schemas

// Diagnostic is one validation failure, pointed at the failing field.
type Diagnostic struct {
	// Path is a JSON Pointer to the failing field ("" is the root). For
	// required and additionalProperties it names the property itself.
	Path string `json:"path"`
	// Keyword is the JSON Schema keyword that failed ("type", "required",
	// "enum", "minimum", ...).
	Keyword string `json:"keyword"`
	// Message is the validator's message, in words.
	Message string `json:"message"`
	// Expected is what the schema asks for, in short ("number > 0",
	// "one of \"EUR\", \"USD\"", "string matching ^[A-Z]{3}$").
	Expected string `json:"expected,omitempty"`
	// Received is the value found at Path as JSON text, cut to 200
	// characters; empty when the field is absent.
	Received string `json:"received,omitempty"`
}
