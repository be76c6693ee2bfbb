// Command pipeline turns unreliable LLM output into validated, structured
// data at batch scale. Run `pipeline --help` for the commands.
package main

import "os"

func main() {
	os.Exit(Main(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
