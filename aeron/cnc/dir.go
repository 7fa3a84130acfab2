package cnc

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
)

// DefaultDir is where Aeron keeps a driver's files when nothing says
// otherwise, as the C client's aeron_default_path: /dev/shm/aeron-<user>
// on Linux, <tmp>/aeron-<user> elsewhere. The user is $USER when set (even
// empty, as C's getenv sees it), else the password entry of the process's
// uid, else "default" (a scratch container without /etc/passwd). The
// driver, the Go client and the CLI all resolve it here, so that they meet
// in one directory.
func DefaultDir() string {
	name, ok := os.LookupEnv("USER")
	if !ok {
		name = "default"
		if u, err := user.Current(); err == nil && u.Username != "" {
			name = u.Username
		}
	}
	if runtime.GOOS == "linux" {
		return "/dev/shm/aeron-" + name
	}
	return filepath.Join(os.TempDir(), "aeron-"+name)
}

// Dir is $AERON_DIR when set and not empty, else DefaultDir: the directory
// a client or tool looks for the driver in (aeron_context_init).
func Dir() string {
	if d := os.Getenv("AERON_DIR"); d != "" {
		return d
	}
	return DefaultDir()
}
