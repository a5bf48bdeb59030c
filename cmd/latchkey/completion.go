package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// completeCommand is the hidden command the completion scripts call with
// the words of the command line before the one being completed; it prints
// the candidates, one a line, and the shell keeps those that fit.
const completeCommand = "__complete"

const completionUsage = `usage: latchkey completion bash|zsh|fish

Prints a script that completes latchkey's commands, subcommands and flags
in the shell named. Load it for the current shell, or install it:

  bash   source <(latchkey completion bash)
         latchkey completion bash > /etc/bash_completion.d/latchkey
  zsh    source <(latchkey completion zsh)
         latchkey completion zsh > "${fpath[1]}/_latchkey"
  fish   latchkey completion fish | source
         latchkey completion fish > ~/.config/fish/completions/latchkey.fish

The scripts ask latchkey itself (latchkey __complete WORDS...), so they
always match the binary on the PATH.
`

// completionScripts are the shells' scripts; each asks completeCommand.
var completionScripts = map[string]string{
	"bash": `# bash completion for latchkey
_latchkey() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$(latchkey __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _latchkey latchkey
`,
	"zsh": `#compdef latchkey
# zsh completion for latchkey
_latchkey() {
	local -a candidates
	candidates=("${(@f)$(latchkey __complete "${(@)words[2,CURRENT-1]}" 2>/dev/null)}")
	if (( ${#candidates} )) && [[ -n ${candidates[1]} ]]; then
		compadd -- "${candidates[@]}"
	else
		_files
	fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_latchkey "$@"
else
	compdef _latchkey latchkey
fi
`,
	"fish": `# fish completion for latchkey
function __latchkey_complete
	set -l words (commandline -opc)
	latchkey __complete $words[2..-1] 2>/dev/null
end
complete -c latchkey -f -a '(__latchkey_complete)'
`,
}

func completionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), completionUsage) }
	shells, code, ok := parseNamed(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(shells) != 1 || completionScripts[shells[0]] == "" {
		fmt.Fprintf(stderr, "latchkey completion: name one shell: bash, zsh or fish (got %q)\n", shells)
		return exitUsage
	}
	fmt.Fprint(stdout, completionScripts[shells[0]])
	return exitOK
}

// completeCmd prints the candidates for the word after words.
func completeCmd(ctx context.Context, words []string, stdout, _ io.Writer) int {
	for _, c := range candidates(ctx, words) {
		fmt.Fprintln(stdout, c)
	}
	return exitOK
}

// candidates returns what may follow words on a latchkey command line:
// commands, then a command's subcommands, then its flags (none after "--",
// where the command to run begins, nor where a flag's value goes).
func candidates(ctx context.Context, words []string) []string {
	if len(words) == 0 {
		return visibleCommands()
	}
	c := findCommand(words[0])
	if c == nil || c.summary == "" {
		return nil
	}
	rest := words[1:]
	if c.name == "help" {
		if len(rest) == 0 {
			return visibleCommands()
		}
		if h := findCommand(rest[0]); h != nil && len(rest) == 1 {
			return h.subs
		}
		return nil
	}
	var prefix []string
	switch {
	case c.name == "completion":
		if len(rest) == 0 {
			return c.subs
		}
		return nil
	case len(c.subs) > 0 && len(rest) > 0 && slices.Contains(c.subs, rest[0]):
		prefix, rest = rest[:1], rest[1:]
	case len(c.subs) > 0 && len(rest) == 0 && !c.alone:
		return c.subs
	case len(c.subs) > 0 && !c.alone:
		return nil // not a subcommand
	}
	if slices.Contains(rest, "--") {
		return nil
	}
	fs := commandFlags(ctx, c, prefix)
	if fs == nil {
		return nil
	}
	if n := len(rest); n > 0 {
		name := strings.TrimLeft(rest[n-1], "-")
		if f := fs.Lookup(name); f != nil && strings.HasPrefix(rest[n-1], "-") && !strings.Contains(name, "=") && !isBool(f) {
			return nil // the flag's value comes next
		}
	}
	var out []string
	if c.alone && len(rest) == 0 && len(prefix) == 0 {
		out = append(out, c.subs...)
	}
	fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
	return out
}

// flagCollector, given to a command as its stdout, makes parseFlags hand
// over the flag set it was given and stop the command, which then returns
// without doing anything: that is how completion learns each command's
// flags from the command itself. It travels with the call, not in a
// package variable, so commands running at the same time never see it.
type flagCollector struct {
	io.Writer
	fs *flag.FlagSet
}

// commandFlags returns the flags of command c with the subcommand in
// prefix, as the command defines them.
func commandFlags(ctx context.Context, c *command, prefix []string) *flag.FlagSet {
	got := &flagCollector{Writer: io.Discard}
	_ = c.run(ctx, prefix, got, io.Discard)
	return got.fs
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func visibleCommands() []string {
	var out []string
	for _, c := range commands() {
		if c.summary != "" {
			out = append(out, c.name)
		}
	}
	return out
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return &c
		}
	}
	return nil
}
