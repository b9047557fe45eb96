package config_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/devswitch"
)

type files struct {
	CA   string `env:"CA_FILE" required:"true"`
	Cert string `env:"CERT_FILE" required:"true"`
}

type logging struct {
	Level slog.Level `env:"LOG_LEVEL" default:"info"`
}

type testConfig struct {
	logging
	Listen   string          `env:"LISTEN_ADDR" default:"127.0.0.1:0"`
	Database string          `env:"DATABASE_URL" required:"true"`
	Token    config.Secret   `env:"VAULT_TOKEN"`
	APIKey   string          `env:"API_KEY" secret:"true"`
	Renew    time.Duration   `env:"RENEW" default:"3s"`
	Window   int             `env:"WINDOW" default:"64"`
	Ratio    float64         `env:"RATIO" default:"1.25"`
	Max      uint64          `env:"MAX"`
	Debug    bool            `env:"DEBUG"`
	Peers    []string        `env:"PEERS"`
	TLS      files           `envprefix:"TLS_"`
	Check    validatedNested `envprefix:"CHECK_"`
}

type validatedNested struct {
	Min int `env:"MIN" default:"1"`
	Max int `env:"MAX" default:"2"`
}

func (v validatedNested) Validate() error {
	if v.Min > v.Max {
		return fmt.Errorf("CHECK_MIN (%d) must not exceed CHECK_MAX (%d)", v.Min, v.Max)
	}
	return nil
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadFillsEveryKind(t *testing.T) {
	t.Parallel()
	var cfg testConfig
	err := config.Load("T_", env(map[string]string{
		"T_DATABASE_URL":  "postgres://app:hunter2@db:5432/x",
		"T_VAULT_TOKEN":   "s.abc",
		"T_RENEW":         "250ms",
		"T_MAX":           "18446744073709551615",
		"T_DEBUG":         "true",
		"T_PEERS":         "a, b,,c",
		"T_TLS_CA_FILE":   "/ca.pem",
		"T_TLS_CERT_FILE": "/cert.pem",
		"T_LOG_LEVEL":     "debug",
	}), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := testConfig{
		logging:  logging{Level: slog.LevelDebug},
		Listen:   "127.0.0.1:0",
		Database: "postgres://app:hunter2@db:5432/x",
		Token:    "s.abc",
		Renew:    250 * time.Millisecond,
		Window:   64,
		Ratio:    1.25,
		Max:      18446744073709551615,
		Debug:    true,
		Peers:    []string{"a", "b", "c"},
		TLS:      files{CA: "/ca.pem", Cert: "/cert.pem"},
		Check:    validatedNested{Min: 1, Max: 2},
	}
	if diff := cmp.Diff(want, cfg, cmp.AllowUnexported(testConfig{})); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestLoadReportsEveryProblemByName(t *testing.T) {
	t.Parallel()
	var cfg testConfig
	err := config.Load("T_", env(map[string]string{
		"T_WINDOW":  "lots",
		"T_RENEW":   "3",
		"T_API_KEY": "", // empty is "unset", not a problem
		"T_DEBUG":   "yes please",
	}), &cfg)
	if err == nil {
		t.Fatal("Load accepted a broken environment")
	}
	for _, want := range []string{
		"T_DATABASE_URL is required",
		"T_TLS_CA_FILE is required",
		"T_TLS_CERT_FILE is required",
		`T_WINDOW="lots": not an integer of 64 bits`,
		`T_RENEW="3"`,
		`T_DEBUG="yes please": not a boolean`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

func TestLoadRunsValidators(t *testing.T) {
	t.Parallel()
	var cfg testConfig
	err := config.Load("T_", env(map[string]string{
		"T_DATABASE_URL": "postgres://x", "T_TLS_CA_FILE": "a", "T_TLS_CERT_FILE": "b",
		"T_CHECK_MIN": "5", "T_CHECK_MAX": "2",
	}), &cfg)
	if err == nil || !strings.Contains(err.Error(), "CHECK_MIN (5) must not exceed CHECK_MAX (2)") {
		t.Fatalf("got %v; want the validator's message", err)
	}
}

func TestLoadNeverEchoesSecrets(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Token config.Secret `env:"TOKEN"`
		Port  int           `env:"PORT" secret:"true"`
	}
	err := config.Load("", env(map[string]string{"PORT": "s3cr3t"}), &cfg)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error %v must not show the secret", err)
	}
	if config.Load("", env(nil), cfg) == nil {
		t.Error("Load accepted a non-pointer")
	}
}

func TestDumpMasksSecrets(t *testing.T) {
	t.Parallel()
	cfg := testConfig{
		Database: "postgres://app:hunter2@db:5432/x",
		Token:    "s.abc",
		APIKey:   "k-123",
		Peers:    []string{"a"},
	}
	got := map[string]string{}
	for _, a := range config.Dump("T_", cfg) {
		got[a.Key] = a.Value.String()
	}
	checks := map[string]string{
		"T_DATABASE_URL":  "postgres://app:redacted@db:5432/x",
		"T_VAULT_TOKEN":   "[redacted]",
		"T_API_KEY":       "[redacted]",
		"T_PEERS":         "[a]",
		"T_TLS_CA_FILE":   "",
		"T_LOG_LEVEL":     "INFO",
		"T_CHECK_MIN":     "0",
		"T_TLS_CERT_FILE": "",
	}
	for k, want := range checks {
		if got[k] != want {
			t.Errorf("%s dumped as %q, want %q", k, got[k], want)
		}
	}
	var all strings.Builder
	for _, v := range got {
		all.WriteString(v)
	}
	for _, secret := range []string{"hunter2", "s.abc", "k-123"} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("dump shows %q", secret)
		}
	}
	if s := fmt.Sprint(cfg.Token); s != "[redacted]" {
		t.Errorf("fmt shows a Secret as %q", s)
	}
}

// TestDevSwitchesAreRefusedInReleaseBuilds: a setting tagged devswitch is
// refused when set to anything but its zero value in a build without the
// switches (as every test binary is built), and left at zero; unset or
// set to its zero value, it is no problem.
func TestDevSwitchesAreRefusedInReleaseBuilds(t *testing.T) {
	if devswitch.Enabled {
		t.Skip("built with the development switches")
	}
	type cfg struct {
		Crash    string `env:"CRASH" devswitch:"true"`
		Insecure bool   `env:"INSECURE" default:"false" devswitch:"true"`
	}
	for env, want := range map[string]string{
		"":                            "",
		"INSECURE=false":              "",
		"INSECURE=true":               "X_INSECURE is a development and test switch",
		"CRASH=booked":                "X_CRASH is a development and test switch",
		"CRASH=booked\nINSECURE=true": "X_INSECURE is a development and test switch",
	} {
		vars := map[string]string{}
		for kv := range strings.Lines(env) {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			vars["X_"+k] = v
		}
		var c cfg
		err := config.Load("X_", func(k string) string { return vars[k] }, &c)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", env, err, want)
		}
		if c != (cfg{}) {
			t.Errorf("%q: a refused switch was left set: %+v", env, c)
		}
	}
}
