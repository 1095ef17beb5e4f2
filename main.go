// Command perpd runs a node of the perpd perpetual-futures venue, a local
// devnet, or the admin tools. See README.md.
package main

import (
	"os"

	"github.com/perpd/perpd/cli"
)

func main() { os.Exit(cli.Execute()) }
