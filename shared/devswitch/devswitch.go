// Package devswitch holds what only tests and the local development stack
// may switch on: fault injection (TEST_CRASH_AFTER) and webhooks to
// loopback and private addresses (WEBHOOK_ALLOW_INSECURE_URLS). They are
// compiled in only with the build tag txfence_devswitches, which make test,
// the tests' own service builds and make run use, and release builds do
// not: there, Enabled is false, the code behind it is dead and dropped,
// and a setting tagged devswitch:"true" is refused at start (package
// config), so a production binary cannot be talked into killing itself or
// calling the deployment's own network.
package devswitch

import "fmt"

// Tag is the build tag that compiles the switches in.
const Tag = "txfence_devswitches"

// Refused is the problem with a switch set in a binary built without
// them.
func Refused(setting string) error {
	return fmt.Errorf("%s is a development and test switch, and this binary was built without them (go build -tags %s)", setting, Tag)
}
