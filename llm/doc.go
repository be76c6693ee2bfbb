// Package llm TODO.
package llm
