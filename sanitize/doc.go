// Package sanitize TODO.
package sanitize
