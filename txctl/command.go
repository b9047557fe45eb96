package txctl

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// command is one txctl command.
type command struct {
	// name is what is typed: "get", "webhooks create".
	name  string
	group string
	// args is the synopsis after the name.
	args    string
	summary string
	// about explains the command in help COMMAND.
	about string
	// minArgs and maxArgs bound the positional arguments; maxArgs -1 has
	// no bound.
	minArgs, maxArgs int
	// streams marks a command that has no default timeout.
	streams bool
	// local marks a command that never calls the API, so needs no key.
	local bool
	// define declares the command's flags on fs and returns what runs it
	// once they are parsed.
	define func(fs *flag.FlagSet) func(x *env, args []string) error
}

// The groups of txctl help, in order.
var groups = []string{"Transactions", "Approvals", "Operations (scope admin)", "Webhooks (scope webhooks)", "Ledger (scope ledger:read)",
	"Ledger adjustments (scope admin)", "API keys", "txctl"}

// commands is every command; init fills it, since help refers to it.
var commands []*command

func init() {
	commands = append(commands, txCommands()...)
	commands = append(commands, approvalCommands()...)
	commands = append(commands, operatorCommands()...)
	commands = append(commands, webhookCommands()...)
	commands = append(commands, ledgerCommands()...)
	commands = append(commands, adjustmentCommands()...)
	commands = append(commands, keyCommands()...)
	// run answers help and version itself, before any flag is parsed:
	// they need no key and no server.
	commands = append(commands,
		&command{name: "help", group: "txctl", args: "[COMMAND]", summary: "this text, or a command's usage", maxArgs: -1,
			define: func(*flag.FlagSet) func(*env, []string) error { return nil }},
		&command{name: "version", group: "txctl", summary: "txctl's version",
			define: func(*flag.FlagSet) func(*env, []string) error { return nil }},
	)
}

// lookup finds the command args start with: one word, or two for the
// webhooks, ledger and keys families.
func lookup(args []string) (*command, []string, error) {
	name := args[0]
	family := isFamily(name)
	if family {
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return nil, nil, usagef(name, "%s needs a subcommand: %s", name, strings.Join(subcommands(name), ", "))
		}
		name += " " + args[1]
		args = args[1:]
	}
	for _, c := range commands {
		if c.name == name {
			return c, args[1:], nil
		}
	}
	if family {
		first, _, _ := strings.Cut(name, " ")
		return nil, nil, usagef(first, "unknown command %q; %s has %s", name, first, strings.Join(subcommands(first), ", "))
	}
	return nil, nil, usagef("", "unknown command %q", name)
}

// isFamily reports whether name is the first word of commands that take
// a subcommand.
func isFamily(name string) bool {
	for _, c := range commands {
		if strings.HasPrefix(c.name, name+" ") {
			return true
		}
	}
	return false
}

func isHelpFlag(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

// writeFamilyHelp lists a family's subcommands.
func writeFamilyHelp(w io.Writer, family string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: txctl [global flags] %s SUBCOMMAND [arguments and flags]\n\n", family)
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, c := range commands {
		if strings.HasPrefix(c.name, family+" ") {
			fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nRun 'txctl help %s SUBCOMMAND' for its arguments and flags.\n", family)
	_, err := io.WriteString(w, b.String())
	return err
}

func subcommands(family string) []string {
	var out []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, family+" "); ok {
			out = append(out, sub)
		}
	}
	return out
}

// parseInterleaved parses flags and positional arguments in any order
// (txctl approve ID --key-file k, or --key-file k ID), as the flag
// package alone stops at the first argument that is not a flag. After
// "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func argCount(c *command) string {
	switch {
	case c.maxArgs == 0:
		return "no arguments"
	case c.minArgs == c.maxArgs:
		return fmt.Sprintf("%d argument(s): %s", c.minArgs, c.args)
	default:
		return "arguments " + c.args
	}
}

func helpCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return writeHelp(stdout)
	}
	if len(args) == 1 && isFamily(args[0]) {
		return writeFamilyHelp(stdout, args[0])
	}
	c, rest, err := lookup(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("help", "help takes one command, got %q", strings.Join(args, " "))
	}
	return writeCommandHelp(stdout, c)
}

const helpHead = `txctl is the command-line client of txfence's public API.

Usage: txctl [global flags] COMMAND [arguments and flags]

Global flags go before the command; a command's own flags and arguments
come after it, in any order.
  --url URL      the gateway's public API (env TXCTL_URL; default http://127.0.0.1:8080)
  --key KEY      the API key, txf_... (env TXCTL_KEY, which is better: a flag shows in ps)
  --json         print the API's JSON documents exactly as they came, one per line
                 (a list followed with --all prints each page, watch each event)
  --timeout D    give up after D, a duration such as 30s or 2m (default 30s;
                 watch has none unless given; 0 means none)
`

const helpTail = `
Exit status: 0 success; 1 the API refused or failed, or could not be
reached (the problem is printed on standard error); 2 a usage error,
nothing was sent; 3 watch --until-final saw the transaction end REVERTED
or FAILED.

Run 'txctl help COMMAND' for a command's arguments and flags.
`

func writeHelp(w io.Writer) error {
	var b strings.Builder
	b.WriteString(helpHead)
	for _, g := range groups {
		fmt.Fprintf(&b, "\n%s:\n", g)
		tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		for _, c := range commands {
			if c.group == g {
				fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
			}
		}
		_ = tw.Flush()
	}
	b.WriteString(helpTail)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCommandHelp(w io.Writer, c *command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: txctl [global flags] %s", c.name)
	if c.args != "" {
		fmt.Fprintf(&b, " %s", c.args)
	}
	fmt.Fprintf(&b, "\n\n%s.\n", upperFirst(c.summary))
	if c.about != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.about))
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.define(fs)
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	if len(flags) > 0 {
		sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
		b.WriteString("\nFlags:\n")
		tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		for _, f := range flags {
			name, usage := flag.UnquoteUsage(f)
			if name != "" {
				name = " " + strings.ToUpper(name)
			}
			if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
				name = ""
			}
			if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" && def != "0s" {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, name, usage)
		}
		_ = tw.Flush()
	}
	b.WriteString("\nGlobal flags (before the command): --url, --key, --json, --timeout; see 'txctl help'.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
