package main

import (
	"encoding/json"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/urfave/cli/v2"
)

func (e *env) versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the module version and VCS revision of this binary (as --version does)",
		ArgsUsage: " ",
		Flags:     []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			v := app.BuildVersion()
			if conf(c).Output.JSON {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(e.stdout, "%s\n", b)
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "pipeline version %s\n", v)
			return err
		},
	}
}
