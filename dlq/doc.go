// Package dlq TODO.
package dlq
