//go:build !txfence_devswitches

package devswitch

// Enabled: this is a release build; the switches are refused.
const Enabled = false

// Crash is unreachable in a release build, which refuses the setting that
// would call it.
func Crash() { panic("devswitch.Crash in a release build") }
