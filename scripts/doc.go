// Package scripts TODO.
package scripts
