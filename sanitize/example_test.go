package sanitize_test

import (
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/sanitize"
)

func ExampleClean() {
	raw := []byte("Sure! Here is the invoice:\n```json\n{\n  \"total\": 12.50, // EUR\n  \"paid\": True,\n}\n```")
	res, err := sanitize.Clean(raw)
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println(string(res.JSON))
	fmt.Println(res.Stages)
	// Output:
	// {"total":12.50,"paid":true}
	// [fence comments trailing_commas literals]
}

func ExampleClean_validJSON() {
	// Valid JSON takes the fast path: returned as is, no stages.
	res, _ := sanitize.Clean([]byte(` {"id": 12345678901234567890, "x": 1e-7} `))
	fmt.Println(string(res.JSON), len(res.Stages))
	// Output:
	// {"id": 12345678901234567890, "x": 1e-7} 0
}

func ExampleClean_refusals() {
	for _, raw := range []string{
		`{"items": [{"sku": "A1", "qty": 2}, {"sku": "B`, // the model ran out of tokens
		"I'm sorry, I can't help with that.",
		`{"a": 1, "b": }`,
	} {
		_, err := sanitize.Clean([]byte(raw))
		switch {
		case errors.Is(err, sanitize.ErrTruncated):
			fmt.Println("truncated:", err)
		case errors.Is(err, sanitize.ErrNoJSON):
			fmt.Println("no JSON:", err)
		case errors.Is(err, sanitize.ErrUnrepairable):
			fmt.Println("unrepairable:", err)
		}
	}
	// Output:
	// truncated: truncated JSON at offset 46: inside a string
	// no JSON: no JSON found at offset 0: no object or array in the text
	// unrepairable: unrepairable JSON at offset 14: missing value
}
