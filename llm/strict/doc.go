// Package strict makes the strict form of a schema: the subset of JSON Schema a provider's constrained
// decoding takes (OpenAI's Structured Outputs with strict true, Anthropic's
// structured outputs), made from the job's schema, and the way back from
// an answer to that subset to one the job's schema judges.
//
// OpenAI (response_format json_schema, strict true) wants every object
// closed (additionalProperties false) and every property listed in
// required; it takes type, enum, const, anyOf, $ref with $defs or
// definitions, description and title everywhere, pattern and format
// (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid) on
// strings, multipleOf, minimum, maximum, exclusiveMinimum and
// exclusiveMaximum on numbers, minItems and maxItems on arrays, and
// refuses the rest with a 400. So the schema sent closes every object,
// lists every property as required and makes an optional one nullable
// (type [T, "null"], or anyOf with {"type":"null"}), turns oneOf into
// anyOf and a one-entry allOf into its entry, drops $schema, $id and
// $comment, and writes every other keyword it cannot take into the
// description of the schema that held it ({"minLength":3}), where the
// model still reads it. An answer's null for a property that was optional
// (and did not take null itself) is dropped before the answer is judged;
// the judge is always the job's own schema.
//
// Anthropic (output_config.format json_schema) wants every object closed
// and keeps required as it is; it takes type, enum, anyOf, allOf, $ref
// with $defs, description, title, format (the list above and uri) and
// minItems of 0 or 1; the rest goes into the description likewise.
//
// A schema that has no strict form (a schema without a type, enum, const,
// anyOf or $ref; an object whose members are all additional or pattern
// properties, a map, which a closed object cannot hold; a root that is not
// an object, for OpenAI) is sent as it is, not strict.
//
// The providers of package llm hold a Cache per client and send the strict
// form of each job's schema; Answers maps answers that reach the heal loop
// other than through a provider's own Complete (a batch's, replayed):
//
//	c := strict.NewCache(strict.OpenAI)
//	s := c.Of(req.Schema)       // s.JSON is sent, with strict s.Strict
//	content = s.Back.Answer(content) // the nulls of optional properties dropped
package strict
