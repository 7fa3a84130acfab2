package driver_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ibgo/ibgo/aeron/driver"
)

// Start a media driver in this process: its own agents on their own
// goroutines (DEDICATED, the default), serving Aeron's C, Java and Go
// clients through the CnC file in its directory until Close. Network media
// are added with WithMedia (aeron/media/udp's udp.New, aeron/media/ib's
// ib.New); without them it serves aeron:ipc alone. For a driver that runs
// only when its owner calls DoWork (INVOKER), see aeron/client's example.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "ibgo-driver-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := driver.DefaultConfig()
	cfg.Dir = dir
	d, err := driver.Start(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	_, err = os.Stat(filepath.Join(d.Dir(), "cnc.dat"))
	fmt.Println(d.Media(), "cnc.dat:", err == nil)
	// Output:
	// [ipc] cnc.dat: true
}
