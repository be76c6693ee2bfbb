// Package worker TODO.
package worker
