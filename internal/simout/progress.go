package simout

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressBar returns a progress bar of a run in virtual seconds on stderr,
// described as desc, or nil when quiet or when stderr is not a terminal
// (a log file or CI gets no bar). prefixsim and prefixload scenario share
// it. Not safe for concurrent use.
func ProgressBar(quiet bool, stderr io.Writer, desc string) *progressbar.ProgressBar {
	file, ok := stderr.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(file.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(1, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription(desc),
		progressbar.OptionSetItsString("virtual s"), progressbar.OptionShowIts(), progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}
