// Package config turns flags and their WORKER_* environment twins into
// settings. A flag given on the command line wins over its environment twin;
// every error names the flag, its variable and what is wanted.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// Set is a flag set whose every flag has an environment twin.
type Set struct {
	fs     *flag.FlagSet
	out    io.Writer
	envs   map[string]string // flag name -> env name
	alias  map[string]string // deprecated flag name -> the flag it spells
	lookup func(string) (string, bool)
}

// NewSet returns a set for one subcommand. lookup reads the environment
// (os.LookupEnv when nil).
func NewSet(name string, usage io.Writer, lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported as one line by Parse
	return &Set{fs: fs, out: usage, envs: map[string]string{}, alias: map[string]string{}, lookup: lookup}
}

// SetOutput sets where --help prints the usage.
func (s *Set) SetOutput(w io.Writer) { s.out = w }

// FlagSet exposes the underlying set (for Usage).
func (s *Set) FlagSet() *flag.FlagSet { return s.fs }

func (s *Set) add(name, env string) {
	s.envs[name] = env
}

func (s *Set) help(usage, env string) string {
	if env == "" {
		return usage
	}
	return usage + " (env " + env + ")"
}

// String defines a string setting.
func (s *Set) String(p *string, name, env, def, usage string) {
	s.fs.StringVar(p, name, def, s.help(usage, env))
	s.add(name, env)
}

// Int defines an integer setting.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	s.fs.IntVar(p, name, def, s.help(usage, env))
	s.add(name, env)
}

// Bool defines a boolean setting.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	s.fs.BoolVar(p, name, def, s.help(usage, env))
	s.add(name, env)
}

// Duration defines a duration setting (Go syntax: 90s, 24h).
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	s.fs.DurationVar(p, name, def, s.help(usage, env))
	s.add(name, env)
}

// List defines a repeatable setting; its env twin is comma-separated.
func (s *Set) List(p *[]string, name, env, usage string) {
	s.fs.Var((*listValue)(p), name, s.help(usage+" (repeatable)", env))
	s.add(name, env)
}

// Alias defines old as a deprecated spelling of the flag name (defined
// before): given, it sets name's value, and name's environment twin is not
// read on top of it.
func (s *Set) Alias(old, name string) {
	f := s.fs.Lookup(name)
	s.fs.Var(f.Value, old, "deprecated: the old spelling of --"+name)
	s.alias[old] = name
}

type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }
func (l *listValue) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// Error is a configuration error: exit code 2, one line.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Errorf makes a configuration error.
func Errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Parse parses args, then fills every flag not given on the command line from
// its environment twin.
func (s *Set) Parse(args []string) error {
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			s.fs.SetOutput(s.out)
			fmt.Fprintf(s.out, "Usage of %s:\n", s.fs.Name())
			s.fs.PrintDefaults()
			return err
		}
		if m := badValue.FindStringSubmatch(err.Error()); m != nil {
			return Errorf("invalid value %s for %s: %s", m[1], s.Name(m[2]), want(s.fs.Lookup(m[2]).Value, errors.New(m[3])))
		}
		return Errorf("%v (see --help)", err)
	}
	if s.fs.NArg() > 0 {
		return Errorf("unexpected argument %q (flags start with --)", s.fs.Arg(0))
	}
	given := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) {
		given[f.Name] = true
		if to, ok := s.alias[f.Name]; ok {
			given[to] = true
		}
	})
	var err error
	s.fs.VisitAll(func(f *flag.Flag) {
		env := s.envs[f.Name]
		if err != nil || given[f.Name] || env == "" {
			return
		}
		v, ok := s.lookup(env)
		if !ok {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = Errorf("invalid %s=%q: %s", env, v, want(f.Value, serr))
		}
	})
	return err
}

// Name returns "--flag (ENV)" for messages.
func (s *Set) Name(flagName string) string {
	if env := s.envs[flagName]; env != "" {
		return "--" + flagName + " (" + env + ")"
	}
	return "--" + flagName
}

// badValue matches the flag package's error for a value that does not parse.
var badValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for flag -([^:]+): (.*)$`)

// want says what a flag's value must look like.
func want(v flag.Value, err error) string {
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case int:
			return "want a whole number"
		case bool:
			return "want true or false"
		case time.Duration:
			return "want a duration such as 30s, 5m or 24h"
		}
	}
	return err.Error()
}
