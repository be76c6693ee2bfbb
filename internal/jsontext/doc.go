// Package jsontext holds the JSON string primitives shared by the
// project's hand-written encoders and decoders (the worker's outcome
// encoder, the simulator's writer, the job parser, the index's outcome
// decoder, the validator's fast path): escaping a string as encoding/json
// does, and decoding a string's escapes, surrogate pairs included.
//
// They exist once so that a subtle case (a lone surrogate, U+2028, invalid
// UTF-8) is decided in one place, and the fuzz tests here hold it to
// encoding/json.
package jsontext
