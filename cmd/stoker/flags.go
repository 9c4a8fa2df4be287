package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// usageError is a command line that does not parse: main prints it and
// exits 2, as the flag package would.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// parseFlags parses args into fs. A bad flag is an error of one line and a
// second pointing at --help: the flag package's own handling prints every
// flag's usage after it, a hundred lines that bury the one that matters.
// -h or --help prints the usage (fs.Usage) and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.Init(fs.Name(), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is returned, not printed with the usage
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	return usageError{fmt.Errorf("%s: %w\nsee 'stoker %s --help' for the flags", fs.Name(), err, fs.Name())}
}
