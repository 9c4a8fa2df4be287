// Command stoker serves augmented image batches to trainers and measures
// the pipeline.
//
//	stoker serve   --listen ADDR --dataset NAME=PATH [...]
//	stoker bench pipeline --data DIR --threads N [--json]
//	stoker preview --data DIR -o grid.png
//	stoker mkdata  --out DIR [--n 2000]
package main

import (
	"fmt"
	"os"
)

var commands = map[string]func(args []string) error{
	"serve":   runServe,
	"bench":   runBenchCmd,
	"preview": runPreview,
	"mkdata":  runMkdata,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: stoker serve|bench|preview|mkdata [flags]  (stoker CMD -h for flags)")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "stoker:", err)
		os.Exit(1)
	}
}
