package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// run is the whole program: it parses args (with every flag also read from ROOKERY_<FLAG> through
// getenv), runs the subcommand until it ends or ctx is cancelled, and returns its error. Tests call
// it directly, as main does.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	root := &cobra.Command{
		Use:           "rookery",
		Short:         "Rookery: a self-hosted social feed backend",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd.Flags(), getenv)
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	root.AddCommand(
		serveCmd(&cfg, stdout, stderr),
		tokenCmd(&cfg, stdout),
		migrateCmd(&cfg, stdout),
		dlqCmd(&cfg, stdout),
		backupCmd(&cfg, stdout),
		restoreCmd(&cfg, stdout),
		streaksCmd(&cfg, stdout),
		importCmd(&cfg, stderr),
		benchCmd(&cfg, stdout, stderr),
		&cobra.Command{
			Use:   "version",
			Short: "Print the version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				fmt.Fprintln(stdout, "rookery", versionString())
				return nil
			},
		},
	)
	return root.ExecuteContext(ctx)
}

// bindEnv sets every flag that was not given on the command line from the environment variable
// ROOKERY_<FLAG> (upper case, '-' as '_'), if that is set. A value that does not parse is an error
// naming the variable.
func bindEnv(flags *pflag.FlagSet, getenv func(string) string) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if serr := flags.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment variable %s: %v", name, serr)
			}
		}
	})
	return err
}

func envName(flag string) string {
	return "ROOKERY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + bi.GoVersion
	}
	return v
}
