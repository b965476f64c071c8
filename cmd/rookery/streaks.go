package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// streaksCmd holds the streak operations; `repair` runs through the server's admin route, like
// `dlq`, with a server token minted from the same configuration as `serve`.
func streaksCmd(cfg *config, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "streaks", Short: "Operate on daily streaks"}
	var server, from, to string
	repair := &cobra.Command{
		Use:   "repair --from T1 --to T2",
		Short: "Keep alive the streaks that an outage of the service from T1 to T2 would break",
		Long: "For every user whose streak was alive when the outage began, the local days of the window\n" +
			"without activity are excused (neither active nor missed), and the streak is computed again\n" +
			"from the user's daily records. Each change is printed here and logged by the server.\n" +
			"Running it again changes nothing more. Times are RFC 3339 (2026-06-10T00:00:00Z).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var bad []string
			t1, err1 := time.Parse(time.RFC3339, from)
			if err1 != nil {
				bad = append(bad, fmt.Sprintf("--from %q", from))
			}
			t2, err2 := time.Parse(time.RFC3339, to)
			if err2 != nil {
				bad = append(bad, fmt.Sprintf("--to %q", to))
			}
			if len(bad) > 0 {
				return fmt.Errorf("%s: --from and --to are required, as RFC 3339 times (2026-06-10T00:00:00Z)", strings.Join(bad, " and "))
			}
			if !t1.Before(t2) {
				return errors.New("--from must be before --to")
			}
			c, err := newAPIClient(cfg, server, 1)
			if err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]time.Time{"from": t1, "to": t2})
			fmt.Fprintf(stdout, "repairing streaks for the outage %s .. %s\n", t1.Format(time.RFC3339), t2.Format(time.RFC3339))
			// Every streak is read: on a large app, minutes.
			out, err := c.doLong(cmd.Context(), http.MethodPost, "/v1/admin/streaks/repair", body, "repairing", cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var res struct {
				Checked int `json:"checked"`
				Changes []struct {
					UserID  string   `json:"user_id"`
					Excused []string `json:"excused"`
					Before  int      `json:"before"`
					After   int      `json:"after"`
				} `json:"changes"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return err
			}
			for _, ch := range res.Changes {
				fmt.Fprintf(stdout, "user %s: excused %s; current streak %d -> %d\n", ch.UserID, strings.Join(ch.Excused, ", "), ch.Before, ch.After)
			}
			fmt.Fprintf(stdout, "checked %d streaks, changed %d\n", res.Checked, len(res.Changes))
			return nil
		},
	}
	f := repair.Flags()
	f.StringVar(&server, "server", "http://127.0.0.1:8080", "the running server's base URL")
	f.StringVar(&from, "from", "", "when the outage began (RFC 3339)")
	f.StringVar(&to, "to", "", "when the outage ended (RFC 3339)")
	cfg.addClientFlags(f)
	cmd.AddCommand(repair)
	return cmd
}
