// Package chunk splits a long document into the chunks that become jobs of
// their own, and merges the chunks' answers back into one by the schema.
// Both are pure functions: no NATS, no SQL, no model.
//
//	ranges := chunk.Split(text, 8000, 400) // nil when text fits in one chunk
//	for k, r := range ranges {
//		part := chunk.Text(text, r) // chunk k+1 of len(ranges)
//		...
//	}
//
//	m, err := chunk.NewMerger(schema.Raw)
//	merged, conflicts, err := m.Merge([]chunk.Part{{Chunk: 1, Data: d1}, {Chunk: 2, Data: d2}})
//
// Splitting cuts at paragraph boundaries (blank lines) first, then sentence
// ends, then whitespace, then between CJK characters, never inside a word
// (a "word" longer than a whole chunk is the one thing cut hard).
// Consecutive chunks share about overlap characters. Characters are Unicode
// code points, and a Range counts them.
//
// Merging follows the schema: objects merge property by property; arrays
// concatenate in chunk order, an element equal to one taken from another
// chunk being dropped (equal as JSON values, or on the properties the array
// schema's "x-merge-key" lists, the later element then filling in what the
// first lacked); scalars keep the first non-null value in chunk order, and a
// different non-null value from a later chunk is recorded as a Conflict.
package chunk
